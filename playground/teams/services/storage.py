"""A team's storage mode (issue 37): what the records of its requests keep of their text.

Owners change it on the team's Data page, operators with `manage.py team_settings`; either way
the audit log says who, what it was and what it became. It applies to the next record written,
in every process (`usage.storage.team_store_mode` reads it then); records written before keep
what they kept.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from playground.accounts.models import AuditAction, Membership, StoreMode, Team
from playground.teams.services.api_keys import OPERATOR
from playground.teams.services.audit import audit
from playground.teams.services.role_checks import require_owner


def team_store_mode_update(*, actor: Membership, mode: str) -> Team:
    """Owners only: the team's storage mode. Audited when it changes."""
    require_owner(actor)
    return _update(team=actor.team, mode=mode, user=actor.user, actor_name="")


def team_store_mode_set_by_operator(*, team: Team, mode: str) -> Team:
    """The storage mode set on the server's command line: the audit log names `manage.py`."""
    return _update(team=team, mode=mode, user=None, actor_name=OPERATOR)


def _update(*, team: Team, mode: str, user: User | None, actor_name: str) -> Team:
    if mode not in StoreMode.values:
        raise ValidationError({"store_mode": f"Not a storage mode: choose {', '.join(StoreMode.values)}."})
    with transaction.atomic():
        locked = Team.objects.select_for_update().get(pk=team.pk)
        if locked.store_mode != mode:
            audit(
                actor=user,
                actor_name=actor_name,
                team=locked,
                action=AuditAction.STORE_MODE_CHANGED,
                target=locked.name,
                previous=locked.store_mode,
                store_mode=mode,
            )
            locked.store_mode = mode
            locked.save(update_fields=["store_mode"])
    team.store_mode = mode
    return team
