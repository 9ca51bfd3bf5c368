"""Raising an alert: the event is recorded once per occurrence, and one delivery per destination
that subscribed to its kind is queued once the transaction commits. Nothing here sends: a slow or
failing destination never holds up what raised the alert."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.db import IntegrityError, transaction

from playground.alerts.models import AlertDelivery, AlertDestination, AlertEvent, AlertKind


def alert_raise(
    *, team_id: int, kind: AlertKind, key: str, title: str, summary: str, details: dict[str, Any]
) -> AlertEvent | None:
    """Record the event and queue its deliveries; None when this occurrence was raised before."""
    try:
        with transaction.atomic():
            event = AlertEvent.objects.create(
                team_id=team_id, kind=kind, key=key, title=title, summary=summary, details=details
            )
            destinations = AlertDestination.objects.filter(team_id=team_id, enabled=True)
            deliveries = AlertDelivery.objects.bulk_create(  # a team has a few: SQLite has no JSON `contains`
                AlertDelivery(event=event, destination=each) for each in destinations if kind in each.kinds
            )
    except IntegrityError:
        return None
    _enqueue_on_commit([delivery.pk for delivery in deliveries])
    return event


def alert_test(*, destination: AlertDestination, key: str) -> AlertDelivery:
    """A test event sent to `destination` alone (its "Send test" button)."""
    with transaction.atomic():
        event = AlertEvent.objects.create(
            team_id=destination.team_id,
            kind=AlertKind.TEST,
            key=key,
            title=f"Test alert for {destination.name}",
            summary="If you can read this, the playground's alerts reach this destination.",
            details={},
        )
        delivery = AlertDelivery.objects.create(event=event, destination=destination)
    _enqueue_on_commit([delivery.pk])
    return delivery


def _enqueue_on_commit(delivery_ids: list[int]) -> None:
    for delivery_id in delivery_ids:
        # robust: a broker that cannot take the task is logged, never raised into the caller
        transaction.on_commit(partial(_enqueue, delivery_id), robust=True)


def _enqueue(delivery_id: int) -> None:
    from playground.alerts.tasks import alert_deliver  # tasks import services, not the other way

    alert_deliver.delay(delivery_id)
