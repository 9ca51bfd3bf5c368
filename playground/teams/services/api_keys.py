"""Team API keys: created (the secret returned once, never stored), changed and revoked by owners
and admins, every change audited without the secret.

A revoked key stays (its records point at it) and cannot be changed again. Revoking takes effect
on the key's next request, on every web process: the gateway reads the key from the database on
each request (`gateway.admission.api_key_authenticate`), so nothing is cached to invalidate.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from playground.accounts.models import AuditAction, Membership, StoreMode, Team
from playground.providers.connection_check import connection_models_check
from playground.providers.model_ids import MODEL_ID_HELP, model_id_validate
from playground.providers.models import ProviderConnection
from playground.teams.services.audit import audit
from playground.teams.services.role_checks import require_manager
from playground.usage.api_keys import api_key_issue
from playground.usage.models import KEY_STORE_MODES, TEAM_STORE_MODE, ApiKey

# The audit log's actor for keys made on the server's command line (`gateway_key_create`).
OPERATOR = "manage.py"
NAME_TAKEN = "This team already has a key with that name (revoked keys keep theirs): choose another."
NOT_FOUND = "That API key is not one of this team's."
REVOKED_KEPT = "A revoked key cannot be changed: create a new one."


@dataclass(frozen=True)
class KeySettings:
    """What an owner or admin chooses for a key; all but the name and the connection are optional."""

    name: str
    connection_id: int | None
    allowed_models: tuple[str, ...] = ()  # none: every model the connection serves
    monthly_budget_usd: Decimal | None = None
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    expires_at: dt.datetime | None = None
    # Its requests follow the team's routing policy (Team -> Routing); `connection_id` is where a
    # request that no rule matches goes.
    follows_policy: bool = False
    # What its requests' records keep of their text (`ApiKey.store_mode`; "" the team's mode).
    store_mode: str = StoreMode.REDACTED

    def limits(self) -> dict[str, Any]:
        """The optional fields as `ApiKey` names them (the allow-list without repeats)."""
        return {
            "allowed_models": list(dict.fromkeys(self.allowed_models)),
            "monthly_budget_usd": self.monthly_budget_usd,
            "requests_per_minute": self.requests_per_minute,
            "tokens_per_minute": self.tokens_per_minute,
            "expires_at": self.expires_at,
            "follows_policy": self.follows_policy,
            "store_mode": self.store_mode,
        }


def api_key_create(*, actor: Membership, settings: KeySettings) -> tuple[ApiKey, str]:
    """A key of the actor's team and its secret (shown once). Its creator's member budget
    applies to its requests too, and the records name them as the user."""
    require_manager(actor)
    return _create(team=actor.team, settings=settings, user=actor.user, actor_name="")


def api_key_create_by_operator(*, team: Team, settings: KeySettings) -> tuple[ApiKey, str]:
    """A key made on the server's command line (`manage.py gateway_key_create`): whoever runs it
    already holds the database, so no role is checked. The key has no creator (no member
    budget applies) and the audit log names `manage.py`."""
    return _create(team=team, settings=settings, user=None, actor_name=OPERATOR)


def _create(*, team: Team, settings: KeySettings, user: User | None, actor_name: str) -> tuple[ApiKey, str]:
    connection = _settings_check(team=team, settings=settings, expiry_set=True)
    try:
        with transaction.atomic():
            key, secret = api_key_issue(
                team_id=team.pk,
                name=settings.name,
                connection_id=connection.pk,
                created_by_id=user.pk if user else None,
                **settings.limits(),
            )
            key.connection = connection
            audit(
                actor=user,
                actor_name=actor_name,
                team=team,
                action=AuditAction.API_KEY_CREATED,
                target=str(key),
                **_audited(key),
            )
    except IntegrityError:  # the name, taken (a concurrent create)
        raise ValidationError({"name": NAME_TAKEN}) from None
    return key, secret


def api_key_update(*, actor: Membership, key_id: int, settings: KeySettings) -> ApiKey:
    """Change a key's name, connection, allowed models, budget, limits or expiry; the audit
    row holds what changed and what it was (none when nothing changed)."""
    require_manager(actor)
    with transaction.atomic():
        key = ApiKey.objects.select_for_update().filter(team_id=actor.team_id, pk=key_id).first()
        if key is None:
            raise ValidationError(NOT_FOUND)
        if key.revoked_at is not None:
            raise ValidationError(REVOKED_KEPT)
        connection = _settings_check(
            team=actor.team, settings=settings, expiry_set=settings.expires_at != key.expires_at
        )
        before = _audited(key)
        key.name, key.connection = settings.name, connection
        for name, value in settings.limits().items():
            setattr(key, name, value)
        try:
            with transaction.atomic():
                key.save()
        except IntegrityError:
            raise ValidationError({"name": NAME_TAKEN}) from None
        after = _audited(key)
        changed = {name: value for name, value in after.items() if before[name] != value}
        if changed:
            audit(
                actor=actor.user,
                team=actor.team,
                action=AuditAction.API_KEY_UPDATED,
                target=str(key),
                previous={name: before[name] for name in changed},
                **changed,
            )
    return key


def api_key_revoke(*, actor: Membership, key_id: int) -> ApiKey:
    """Revoke a key of the actor's team (one conditional UPDATE: a second revoke is refused)."""
    require_manager(actor)
    now = timezone.now()
    with transaction.atomic():
        revoked = ApiKey.objects.filter(team_id=actor.team_id, pk=key_id, revoked_at__isnull=True).update(
            revoked_at=now
        )
        key = ApiKey.objects.select_related("connection").filter(team_id=actor.team_id, pk=key_id).first()
        if key is None:
            raise ValidationError(NOT_FOUND)
        if not revoked:
            raise ValidationError(f"The key {key.name} was already revoked.")
        audit(actor=actor.user, team=actor.team, action=AuditAction.API_KEY_REVOKED, target=str(key))
    return key


def _settings_check(*, team: Team, settings: KeySettings, expiry_set: bool) -> ProviderConnection:
    """The key's connection (one of the team's), or a `ValidationError` keyed by the form's fields.
    Blocking: the engine is asked which models it serves."""
    errors: dict[str, str] = {}
    if not settings.name.strip():
        errors["name"] = "Name the key after what uses it."
    connection = (
        ProviderConnection.objects.filter(team=team, pk=settings.connection_id).first()
        if settings.connection_id is not None
        else None
    )
    if connection is None:
        errors["connection"] = "Choose one of this team's connections."
    if settings.monthly_budget_usd is not None and settings.monthly_budget_usd < 0:
        errors["monthly_budget_usd"] = "A budget cannot be negative."
    for name in ("requests_per_minute", "tokens_per_minute"):
        value = getattr(settings, name)
        if value is not None and value < 1:
            errors[name] = "At least 1, or blank for no limit."
    if expiry_set and settings.expires_at is not None and settings.expires_at <= timezone.now():
        errors["expires_at"] = "Choose a time in the future (or leave it blank: the key never expires)."
    if settings.store_mode not in dict(KEY_STORE_MODES):
        errors["store_mode"] = f"Not a storage mode: choose {', '.join(StoreMode.values)} or the team's."
    malformed = [model_id for model_id in settings.allowed_models if not _well_formed(model_id)]
    if malformed:
        errors["allowed_models"] = f"Not a model id: {', '.join(malformed)}. {MODEL_ID_HELP}"
    if errors:
        raise ValidationError(errors)
    assert connection is not None
    connection_models_check(connection=connection, model_ids=settings.allowed_models, field="allowed_models")
    return connection


def _well_formed(model_id: str) -> bool:
    try:
        model_id_validate(model_id)
    except ValidationError:
        return False
    return True


def _audited(key: ApiKey) -> dict[str, Any]:
    """What the audit log keeps of a key: its settings, never its secret (nor its hash)."""
    return {
        "name": key.name,
        "prefix": key.prefix,
        "connection": key.connection.name if key.connection else None,
        "allowed_models": list(key.allowed_models) or "all of the connection's",
        "monthly_budget": None if key.monthly_budget_usd is None else f"{key.monthly_budget_usd:.2f}",
        "requests_per_minute": key.requests_per_minute,
        "tokens_per_minute": key.tokens_per_minute,
        "expires": f"{key.expires_at.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC" if key.expires_at else None,
        "follows_routing_policy": key.follows_policy,
        "records_keep": key.store_mode if key.store_mode != TEAM_STORE_MODE else "the team's mode",
    }
