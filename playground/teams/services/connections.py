"""A team's connections: create, change, delete (never the engine's) and test them."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from playground.accounts.models import AuditAction, Membership
from playground.providers.connection_check import (
    ModelListing,
    connection_test_error,
    models_list,
    models_list_target,
)
from playground.providers.kinds import ConnectionKind
from playground.providers.models import ProviderConnection
from playground.providers.services import connection_models_store, connection_save
from playground.teams.services.audit import audit
from playground.teams.services.role_checks import MANAGERS_ONLY, require_manager

ENGINE_KEPT = "The embedded engine connection is the team's own and cannot be deleted."


def connection_write(
    *,
    actor: Membership,
    connection: ProviderConnection,
    token: str | None,
    previous_base_url: str | None,
) -> ProviderConnection:
    """Create or change a connection of the actor's team (validation and token rules in providers)."""
    require_manager(actor)
    if connection.team_id != actor.team_id:
        raise PermissionDenied(MANAGERS_ONLY)
    created = connection.pk is None
    with transaction.atomic():
        connection_save(connection=connection, token=token, previous_base_url=previous_base_url)
        audit(
            actor=actor.user,
            team=actor.team,
            action=AuditAction.CONNECTION_CREATED if created else AuditAction.CONNECTION_UPDATED,
            target=connection.name,
            kind=connection.kind,
            base_url=connection.base_url,
            token="replaced" if token else ("cleared" if token == "" else "unchanged"),
        )
    return connection


def connection_delete(*, actor: Membership, connection: ProviderConnection) -> None:
    """Delete a connection of the actor's team; the embedded engine's stays (every team has one)."""
    require_manager(actor)
    if connection.team_id != actor.team_id:
        raise PermissionDenied(MANAGERS_ONLY)
    if connection.kind == ConnectionKind.ENGINE:
        raise ValidationError(ENGINE_KEPT)
    with transaction.atomic():
        connection.delete()
        audit(
            actor=actor.user, team=actor.team, action=AuditAction.CONNECTION_DELETED, target=connection.name
        )


def connection_test(*, actor: Membership, connection: ProviderConnection) -> ModelListing:
    """List the provider's models through the HTTP seam (latency, or the redacted error) and
    keep the ids it lists. Sync, for the sync team views: the one async call runs here."""
    require_manager(actor)
    if connection.team_id != actor.team_id:
        raise PermissionDenied(MANAGERS_ONLY)
    try:
        target = models_list_target(connection)
    except ValidationError as exc:
        return connection_test_error(exc)
    result = async_to_sync(models_list)(target)
    if result.ok:
        connection_models_store(connection=connection, models=result.models, windows=result.windows)
    return result
