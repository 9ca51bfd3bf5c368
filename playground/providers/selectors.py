"""Reads of provider connections, scoped to the acting user's teams."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from playground.accounts.models import ROLES_THAT_CAN_RUN
from playground.accounts.permissions import require_run_role
from playground.accounts.selectors import AnyUser
from playground.providers.context_windows import served_windows
from playground.providers.kinds import ConnectionKind
from playground.providers.model_ids import model_id_validate
from playground.providers.models import ProviderConnection


def connection_list(*, user: AnyUser) -> QuerySet[ProviderConnection]:
    if not user.is_authenticated:
        return ProviderConnection.objects.none()
    return ProviderConnection.objects.filter(team__memberships__user_id=user.pk).select_related("team")


def connection_list_runnable(*, user: AnyUser) -> QuerySet[ProviderConnection]:
    """Connections of the teams where `user` may send requests (not where they are a viewer),
    by team, the default first."""
    if not user.is_authenticated:
        return ProviderConnection.objects.none()
    return (
        ProviderConnection.objects.filter(
            team__memberships__user_id=user.pk, team__memberships__role__in=ROLES_THAT_CAN_RUN
        )
        .select_related("team")
        .order_by("team__name", "-is_default", "name")
    )


def connection_models_listed(connection: ProviderConnection) -> list[str] | None:
    """The model ids a picker offers for an endpoint that serves any id (OpenAI-compatible): the
    ones its last test listed, not the catalogue's, which it may not serve; for the engine, the
    ones it serves now (asked, kept a minute: the quality model only where it is installed).
    None when the kind serves the catalogue's (Workers AI), the engine does not answer, or the
    endpoint listed none (never tested): the picker then offers the catalogue's, with nothing
    preselected for such an endpoint. Blocking (the engine may be asked)."""
    if connection.kind == ConnectionKind.ENGINE:
        return list(served_windows(connection)) or None
    if not connection.spec.free_model_id:
        return None
    return list(connection.listed_models) if connection.listed_models else None


def connection_get(*, user: AnyUser, connection_id: int) -> ProviderConnection | None:
    return connection_list(user=user).filter(pk=connection_id).first()


def connection_for_run(*, user: AnyUser, connection_id: int, model_id: str) -> tuple[ProviderConnection, str]:
    """The connection and the (stripped) model id a new conversation or batch will send to.

    Raises `ValidationError` keyed by form field (another team's connection, no model, a
    model id unfit for request paths) or `PermissionDenied` (viewers cannot run).
    """
    connection = connection_get(user=user, connection_id=connection_id)
    if connection is None:
        raise ValidationError({"connection": "Choose one of your team's connections."})
    require_run_role(user=user, team_id=connection.team_id)
    model_id = model_id.strip()
    if not model_id:
        raise ValidationError({"model_id": "Choose a model."})
    try:
        model_id_validate(model_id)  # it goes into request paths
    except ValidationError as exc:
        raise ValidationError({"model_id": exc.messages}) from exc
    return connection, model_id
