"""Where a team's alerts go, what raised them, and each delivery's fate."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from playground.accounts.models import Team


class DestinationKind(models.TextChoices):
    SLACK = "slack", "Slack (incoming webhook)"
    TEAMS = "teams", "Microsoft Teams (workflow webhook)"
    WEBHOOK = "webhook", "Webhook (HMAC-signed JSON)"


class AlertKind(models.TextChoices):
    BUDGET = "budget_threshold", "Budget threshold crossed"
    CONNECTION = "connection_failing", "Connection failing"
    SPEND = "spend_anomaly", "Spend anomaly"
    CACHE = "cache_drop", "Cache hit ratio drop"
    TEST = "test", "Test"


SUBSCRIBABLE = [kind for kind in AlertKind if kind != AlertKind.TEST]


class AlertDestination(models.Model):
    """A URL a team's alerts are posted to. The URL (a Slack or Teams webhook URL is itself a
    secret) and the webhook's signing secret are stored encrypted; `url_hint` is what pages show."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="alert_destinations")
    name = models.CharField(max_length=80)
    kind = models.CharField(max_length=10, choices=DestinationKind.choices)
    url_encrypted = models.TextField()
    url_hint = models.CharField(max_length=200)
    signing_secret_encrypted = models.TextField(blank=True)
    kinds = models.JSONField(default=list, help_text="The alert kinds it receives")
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="one_alert_destination_name_per_team")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"

    @property
    def kind_labels(self) -> list[str]:
        return [AlertKind(kind).label for kind in self.kinds if kind in AlertKind.values]


class AlertRules(models.Model):
    """A team's thresholds for the alerts found by looking at its usage."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="alert_rules")
    connection_errors = models.PositiveIntegerField(
        default=5, help_text="Failed requests of one connection..."
    )
    connection_minutes = models.PositiveIntegerField(default=10, help_text="...within this many minutes")
    spend_factor = models.DecimalField(
        max_digits=5, decimal_places=2, default=3, help_text="A day's spend above this many times the median"
    )
    cache_drop_points = models.PositiveSmallIntegerField(
        default=20, help_text="The last hour's cached share this many points below the last 7 days'"
    )

    def __str__(self) -> str:
        return f"Alert rules of team {self.team_id}"


class AlertEvent(models.Model):
    """Something worth telling, raised once: `key` names the occurrence (a month's threshold, a
    connection's window, a day), so evaluating again raises nothing new."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=20, choices=AlertKind.choices)
    key = models.CharField(max_length=120)
    title = models.CharField(max_length=200)
    summary = models.TextField()
    details = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "kind", "key"], name="one_alert_event_per_key")
        ]

    def __str__(self) -> str:
        return self.title


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"


class AlertDelivery(models.Model):
    """One event posted to one destination: its attempts, its last error, its outcome."""

    event = models.ForeignKey(AlertEvent, on_delete=models.CASCADE, related_name="deliveries")
    destination = models.ForeignKey(AlertDestination, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=8, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["destination", "-created_at"], name="alert_delivery_recent")]

    def __str__(self) -> str:
        return f"Delivery {self.pk} of event {self.event_id}"
