"""What the gateway keeps of its own: answers to replay for a repeated `Idempotency-Key`."""

from __future__ import annotations

from django.db import models

from playground.usage.models import ApiKey


class IdempotencyState(models.TextChoices):
    IN_FLIGHT = "in_flight", "In flight"
    DONE = "done", "Done"


class IdempotentRequest(models.Model):
    """A non-streamed request sent with an `Idempotency-Key`, and its answer once it has one.

    Unique per API key and idempotency key: the row is claimed before the request is sent, so
    a concurrent repeat finds it in flight (409) instead of sending the request a second time.
    """

    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    body_sha256 = models.CharField(max_length=64)
    state = models.CharField(
        max_length=10, choices=IdempotencyState.choices, default=IdempotencyState.IN_FLIGHT
    )
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    # The answer's headers to replay (content type, request id, cost), and its body as sent.
    headers = models.JSONField(default=dict)
    body = models.BinaryField(null=True, blank=True)
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["api_key", "key"], name="one_idempotent_request_per_key")
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.state})"
