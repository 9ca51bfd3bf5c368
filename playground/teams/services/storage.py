"""A team's storage mode (issue 37): what the records of its requests keep of their text; and
its upstream redaction: whether its requests go to the model with placeholders for their
sensitive values (`usage.calls.upstream`).

Owners change them on the team's Data page, operators with `manage.py team_settings`; either way
the audit log says who, what it was and what it became. Each applies to the next request, in
every process (both are read as a request is sent or recorded); records written before keep
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


def team_upstream_redaction_update(*, actor: Membership, on: bool) -> Team:
    """Owners only: whether the team's requests go upstream redacted. Audited when it changes."""
    require_owner(actor)
    return _change(team=actor.team, field="upstream_redaction", value=on, user=actor.user, actor_name="")


def team_upstream_redaction_set_by_operator(*, team: Team, on: bool) -> Team:
    return _change(team=team, field="upstream_redaction", value=on, user=None, actor_name=OPERATOR)


def _update(*, team: Team, mode: str, user: User | None, actor_name: str) -> Team:
    if mode not in StoreMode.values:
        raise ValidationError({"store_mode": f"Not a storage mode: choose {', '.join(StoreMode.values)}."})
    return _change(team=team, field="store_mode", value=mode, user=user, actor_name=actor_name)


ACTIONS = {
    "store_mode": AuditAction.STORE_MODE_CHANGED,
    "upstream_redaction": AuditAction.UPSTREAM_REDACTION_CHANGED,
}


def _change(*, team: Team, field: str, value: str | bool, user: User | None, actor_name: str) -> Team:
    """One of the team's data settings changed under a row lock, audited with what it was."""
    with transaction.atomic():
        locked = Team.objects.select_for_update().get(pk=team.pk)
        previous = getattr(locked, field)
        if previous != value:
            audit(
                actor=user,
                actor_name=actor_name,
                team=locked,
                action=ACTIONS[field],
                target=locked.name,
                previous=previous,
                **{field: value},
            )
            setattr(locked, field, value)
            locked.save(update_fields=[field])
    setattr(team, field, value)
    return team
