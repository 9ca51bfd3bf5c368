"""The run-role rule: who may send requests (they cost money) on a team's behalf.

One place for the rule every feature applies: owners, admins and members run; viewers read.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from playground.accounts.models import ROLES_THAT_CAN_RUN, Membership
from playground.accounts.selectors import AnyUser, membership_get

VIEWERS_CANNOT_RUN = (
    "Viewers can read this team's conversations and batches but not send requests (they cost money)."
)


def membership_can_run(membership: Membership | None) -> bool:
    return membership is not None and membership.role in ROLES_THAT_CAN_RUN


def user_can_run(*, user: AnyUser, team_id: int) -> bool:
    """Whether `user` may send requests in `team_id` (False for a non-member)."""
    return membership_can_run(membership_get(user=user, team_id=team_id))


def require_run_role(*, user: AnyUser, team_id: int) -> None:
    """Raise PermissionDenied unless `user` may send requests in `team_id`."""
    if not user_can_run(user=user, team_id=team_id):
        raise PermissionDenied(VIEWERS_CANNOT_RUN)


def team_ids_can_run(*, user: AnyUser) -> set[int]:
    """The teams where `user` may send requests (and so change their conversations)."""
    if not user.is_authenticated:
        return set()
    memberships = Membership.objects.filter(user_id=user.pk, role__in=ROLES_THAT_CAN_RUN)
    return set(memberships.values_list("team_id", flat=True))
