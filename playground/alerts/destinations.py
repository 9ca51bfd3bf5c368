"""Adding and removing a team's alert destinations, and its alert rules (owners and admins)."""

from __future__ import annotations

from decimal import Decimal
from urllib.parse import urlsplit

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from playground.accounts.models import ROLES_THAT_CAN_MANAGE, Membership
from playground.alerts.models import SUBSCRIBABLE, AlertDestination, AlertRules, DestinationKind
from playground.providers.secrets import token_encrypt
from playground.providers.urls_policy import base_url_validate, host_allowlisted

MIN_SECRET_CHARS = 16


def destination_url_validate(url: str) -> None:
    """The outbound checks connections pass (http(s), no credentials in it, no internal address
    unless the operator allowlisted it), with https required unless the host is allowlisted."""
    try:
        base_url_validate(url)
    except ValidationError as exc:
        raise ValidationError(exc.messages[0].replace("The base URL", "The URL")) from None
    parts = urlsplit(url)
    if parts.scheme != "https" and not host_allowlisted((parts.hostname or "").lower()):
        raise ValidationError("The URL must start with https://: alerts carry your team's figures.")


def destination_create(
    *, actor: Membership, name: str, kind: str, url: str, signing_secret: str, kinds: list[str]
) -> AlertDestination:
    """A new destination of the actor's team; `ValidationError` names what is wrong."""
    if actor.role not in ROLES_THAT_CAN_MANAGE:
        raise PermissionDenied("Only owners and admins set where alerts go.")
    errors: dict[str, list[str]] = {}
    if kind not in DestinationKind.values:
        errors["kind"] = ["Choose Slack, Microsoft Teams or a webhook."]
    try:
        destination_url_validate(url)
    except ValidationError as exc:
        errors["url"] = exc.messages
    if kind == DestinationKind.WEBHOOK and len(signing_secret) < MIN_SECRET_CHARS:
        errors["signing_secret"] = [
            f"A webhook needs a signing secret of at least {MIN_SECRET_CHARS} characters: "
            "your receiver checks each request's X-Playground-Signature with it."
        ]
    unknown = set(kinds) - set(SUBSCRIBABLE)
    if unknown or not kinds:
        errors["kinds"] = ["Choose at least one kind of alert."]
    if errors:
        raise ValidationError(errors)
    parts = urlsplit(url)
    destination = AlertDestination(
        team_id=actor.team_id,
        name=name.strip(),
        kind=kind,
        url_encrypted=token_encrypt(url),
        url_hint=f"{parts.scheme}://{parts.hostname}{'/…' if parts.path.strip('/') else ''}",
        signing_secret_encrypted=token_encrypt(signing_secret) if kind == DestinationKind.WEBHOOK else "",
        kinds=[kind_ for kind_ in SUBSCRIBABLE if kind_ in kinds],
        created_by_id=actor.user_id,
    )
    try:
        with transaction.atomic():
            destination.save()
    except IntegrityError:
        raise ValidationError({"name": ["The team already has a destination with this name."]}) from None
    return destination


def destination_delete(*, actor: Membership, destination_id: int) -> bool:
    """Remove one of the actor's team's destinations; False when it has none by that id."""
    if actor.role not in ROLES_THAT_CAN_MANAGE:
        raise PermissionDenied("Only owners and admins set where alerts go.")
    deleted, _ = AlertDestination.objects.filter(team_id=actor.team_id, pk=destination_id).delete()
    return bool(deleted)


def rules_update(
    *,
    actor: Membership,
    connection_errors: int,
    connection_minutes: int,
    spend_factor: Decimal,
    cache_drop_points: int,
) -> AlertRules:
    if actor.role not in ROLES_THAT_CAN_MANAGE:
        raise PermissionDenied("Only owners and admins set the alert rules.")
    rules, _ = AlertRules.objects.update_or_create(
        team_id=actor.team_id,
        defaults={
            "connection_errors": connection_errors,
            "connection_minutes": connection_minutes,
            "spend_factor": spend_factor,
            "cache_drop_points": cache_drop_points,
        },
    )
    return rules
