"""A team's retention (issue 37): after how many days its records lose their text, and after
how many they are deleted (their rollups kept). Owners set it on the team's Data page, operators
with `manage.py team_settings`; the audit log says who, what it was and what it became. The
beat's daily run applies it (`usage.retention`).
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from playground.accounts.models import AuditAction, Membership, Team
from playground.teams.services.api_keys import OPERATOR
from playground.teams.services.audit import audit
from playground.teams.services.role_checks import require_owner
from playground.usage.models import TeamRetention

MAX_DAYS = 3650
# A budget month is at most 31 days: records younger than this are never deleted, so the
# month's budget, which may still be read from its records, always finds them all.
RECORD_DAYS_MIN = 32


def team_retention(team: Team) -> TeamRetention:
    """The team's retention and its runs' state (unsaved and empty when it never set one)."""
    return TeamRetention.objects.filter(pk=team.pk).first() or TeamRetention(team=team)


def team_retention_update(
    *, actor: Membership, body_days: int | None, record_days: int | None
) -> TeamRetention:
    """Owners only: the team's retention (None: kept for good). Audited when it changes."""
    require_owner(actor)
    return _update(
        team=actor.team, body_days=body_days, record_days=record_days, user=actor.user, actor_name=""
    )


def team_retention_set_by_operator(
    *, team: Team, body_days: int | None, record_days: int | None
) -> TeamRetention:
    """The retention set on the server's command line: the audit log names `manage.py`."""
    return _update(team=team, body_days=body_days, record_days=record_days, user=None, actor_name=OPERATOR)


def retention_days_check(*, body_days: int | None, record_days: int | None) -> None:
    errors: dict[str, str] = {}
    if body_days is not None and not 1 <= body_days <= MAX_DAYS:
        errors["body_days"] = f"Texts are kept from 1 to {MAX_DAYS:,} days, or for good."
    if record_days is not None and not RECORD_DAYS_MIN <= record_days <= MAX_DAYS:
        errors["record_days"] = (
            f"Records are kept from {RECORD_DAYS_MIN} to {MAX_DAYS:,} days, or for good: at least "
            "a budget month, whose budget may be read from its records."
        )
    if errors:
        raise ValidationError(errors)


def _update(
    *, team: Team, body_days: int | None, record_days: int | None, user: User | None, actor_name: str
) -> TeamRetention:
    retention_days_check(body_days=body_days, record_days=record_days)
    with transaction.atomic():
        locked = Team.objects.select_for_update().get(pk=team.pk)
        state, _ = TeamRetention.objects.get_or_create(team=locked)
        previous = {"body_days": state.body_days, "record_days": state.record_days}
        wanted = {"body_days": body_days, "record_days": record_days}
        if previous != wanted:
            audit(
                actor=user,
                actor_name=actor_name,
                team=locked,
                action=AuditAction.RETENTION_CHANGED,
                target=locked.name,
                previous=previous,
                **wanted,
            )
            state.body_days, state.record_days = body_days, record_days
            state.save(update_fields=["body_days", "record_days"])
    return state
