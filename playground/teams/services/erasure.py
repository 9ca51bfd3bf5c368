"""Erasing one end user of a team (issue 37): owners on the team's Data page, operators with
`manage.py erase_end_user`. The work is `usage.erasure.end_user_erase`; here the role is
checked, the audit log says who erased how much (the end user by its digest, never the id), and
the space the erased values freed is reclaimed once the erasure has committed."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from playground.accounts.models import AuditAction, Membership, Team
from playground.teams.services.api_keys import OPERATOR
from playground.teams.services.audit import audit
from playground.teams.services.role_checks import require_owner
from playground.usage.erasure import END_USER_MAX, end_user_digest, end_user_erase, erased_tables
from playground.usage.reclaim import reclaim_freed_space


def end_user_erasure_count(*, actor: Membership, end_user: str) -> dict[str, int]:
    """Owners only: what erasing `end_user` would change, by kind; nothing is written."""
    require_owner(actor)
    return end_user_erase(team_id=actor.team_id, end_user=_checked(end_user), dry_run=True)


def end_user_erase_by_owner(*, actor: Membership, end_user: str) -> dict[str, int]:
    """Owners only: `end_user` erased from the team; the counts of what held it."""
    require_owner(actor)
    return _erase(team=actor.team, end_user=end_user, user=actor.user, actor_name="")


def end_user_erase_by_operator(*, team: Team, end_user: str, dry_run: bool = False) -> dict[str, int]:
    """The same on the server's command line: the audit log names `manage.py`."""
    if dry_run:
        return end_user_erase(team_id=team.pk, end_user=_checked(end_user), dry_run=True)
    return _erase(team=team, end_user=end_user, user=None, actor_name=OPERATOR)


def _erase(*, team: Team, end_user: str, user: User | None, actor_name: str) -> dict[str, int]:
    end_user = _checked(end_user)
    with transaction.atomic():
        counts = end_user_erase(team_id=team.pk, end_user=end_user)
        digest = end_user_digest(team_id=team.pk, end_user=end_user)
        audit(
            actor=user,
            actor_name=actor_name,
            team=team,
            action=AuditAction.END_USER_ERASED,
            target=f"end user erased:{digest}",
            end_user_digest=digest,
            **counts,
        )
    reclaim_freed_space(erased_tables())
    return counts


def _checked(end_user: str) -> str:
    value = end_user.strip()
    if not value or len(value) > END_USER_MAX:
        raise ValidationError(
            {"end_user": f"Give the end user's id as its requests sent it (1 to {END_USER_MAX} characters)."}
        )
    return value
