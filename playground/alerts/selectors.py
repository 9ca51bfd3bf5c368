"""What the Team → Alerts page reads: the team's destinations, rules and recent deliveries."""

from __future__ import annotations

from django.db.models import QuerySet

from playground.alerts.models import AlertDelivery, AlertDestination, AlertRules

RECENT_DELIVERIES = 50


def team_destinations(*, team_id: int) -> QuerySet[AlertDestination]:
    return AlertDestination.objects.filter(team_id=team_id)


def team_destination(*, team_id: int, destination_id: int) -> AlertDestination | None:
    return AlertDestination.objects.filter(team_id=team_id, pk=destination_id).first()


def team_rules(*, team_id: int) -> AlertRules:
    """The team's thresholds; the defaults until it saved its own."""
    return AlertRules.objects.filter(team_id=team_id).first() or AlertRules(team_id=team_id)


def team_deliveries(*, team_id: int) -> list[AlertDelivery]:
    return list(
        AlertDelivery.objects.filter(destination__team_id=team_id)
        .select_related("event", "destination")
        .order_by("-created_at", "-id")[:RECENT_DELIVERIES]
    )
