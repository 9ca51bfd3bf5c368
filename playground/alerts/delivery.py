"""Posting an event to a destination in its own format, signed when it is a webhook, and what a
failed attempt leads to: another after a backoff, or the delivery given up and logged.

Webhook signature: `X-Playground-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of
"<t>." + the body's exact bytes, keyed by the destination's signing secret>`. A receiver checks
the HMAC and refuses a `t` older than a few minutes (replay). The URL passes the outbound checks
connections pass, at connect time too (no internal address unless allowlisted, no redirect).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from datetime import timedelta
from typing import Any

from django.utils import timezone

from playground.alerts.models import AlertDelivery, AlertEvent, DeliveryStatus, DestinationKind
from playground.providers.http import TimeoutPolicy, UpstreamHTTPError, upstream_stream
from playground.providers.secrets import token_decrypt

MAX_ATTEMPTS = 5
FIRST_BACKOFF_SECONDS = 30.0  # then 60, 120, 240
TIMEOUTS = TimeoutPolicy(connect=5.0, first_byte=10.0, total=15.0)
ERROR_CHARS = 300


def signature(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def _payload(kind: str, event: AlertEvent) -> dict[str, Any]:
    if kind == DestinationKind.SLACK:
        return {"text": f"*{event.title}*\n{event.summary}"}
    if kind == DestinationKind.TEAMS:  # a Workflows "post to a channel" webhook takes an Adaptive Card
        card = {
            "type": "AdaptiveCard",
            "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
            "version": "1.4",
            "body": [
                {"type": "TextBlock", "text": event.title, "weight": "Bolder", "wrap": True},
                {"type": "TextBlock", "text": event.summary, "wrap": True},
            ],
        }
        return {
            "type": "message",
            "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "content": card}],
        }
    return {
        "id": event.pk,
        "kind": event.kind,
        "team": event.team_id,
        "title": event.title,
        "summary": event.summary,
        "details": event.details,
        "created_at": event.created_at.isoformat(),
    }


def request_for(delivery: AlertDelivery) -> tuple[str, bytes, dict[str, str]]:
    """The URL, the exact body and the headers of `delivery`'s next attempt."""
    destination = delivery.destination
    body = json.dumps(_payload(destination.kind, delivery.event), separators=(",", ":")).encode()
    headers = {"content-type": "application/json", "user-agent": "playground-alerts"}
    if destination.kind == DestinationKind.WEBHOOK:
        secret = token_decrypt(destination.signing_secret_encrypted)
        headers |= {
            "x-playground-event": delivery.event.kind,
            "x-playground-delivery": str(delivery.pk),
            "x-playground-signature": signature(secret, int(time.time()), body),
        }
    return token_decrypt(destination.url_encrypted), body, headers


async def _post(url: str, body: bytes, headers: dict[str, str]) -> int:
    async with upstream_stream(
        "POST", url, headers=headers, content=body, timeout_policy=TIMEOUTS
    ) as response:
        await response.read()
        return response.status


def delivery_attempt(delivery_id: int) -> float | None:
    """Try `delivery_id` once; the seconds to wait before the next try, or None when it is done
    (sent, given up, or not pending any more)."""
    delivery = (
        AlertDelivery.objects.select_related("event", "destination")
        .filter(pk=delivery_id, status=DeliveryStatus.PENDING)
        .first()
    )
    if delivery is None:
        return None
    url, body, headers = request_for(delivery)
    attempts = delivery.attempts + 1
    try:
        status = asyncio.run(_post(url, body, headers))
    except UpstreamHTTPError as exc:
        retry_in = FIRST_BACKOFF_SECONDS * 2 ** (attempts - 1) if attempts < MAX_ATTEMPTS else None
        AlertDelivery.objects.filter(pk=delivery_id).update(
            attempts=attempts,
            response_status=exc.status or None,
            last_error=str(exc)[:ERROR_CHARS],
            status=DeliveryStatus.PENDING if retry_in is not None else DeliveryStatus.FAILED,
            next_attempt_at=timezone.now() + timedelta(seconds=retry_in) if retry_in is not None else None,
        )
        return retry_in
    AlertDelivery.objects.filter(pk=delivery_id).update(
        attempts=attempts,
        response_status=status,
        last_error="",
        status=DeliveryStatus.SENT,
        next_attempt_at=None,
        sent_at=timezone.now(),
    )
    return None
