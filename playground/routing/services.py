"""Putting a routing policy in force: a new version, or every problem and nothing saved."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Max

from playground.accounts.chain import chain_append
from playground.accounts.models import Team
from playground.routing.chain import POLICY_VERSIONS
from playground.routing.models import RoutingPolicy
from playground.routing.problems import PolicyInvalid
from playground.routing.selectors import policy_cache_forget
from playground.routing.validation import document_load, document_team_problems


def routing_policy_save(*, team: Team, document: object, user: User | None, note: str = "") -> RoutingPolicy:
    """Save `document` (JSON text or a parsed value) as the team's next version, in force at once
    in this process (others within `selectors.POLICY_TTL_SECONDS`). Raises `PolicyInvalid` with
    every problem at its JSON path; the version in force then stays."""
    parsed, problems = document_load(document)
    if parsed is not None:
        problems = document_team_problems(parsed, team_id=team.pk)
    if problems or parsed is None:
        raise PolicyInvalid(problems)
    with transaction.atomic():
        Team.objects.select_for_update().filter(pk=team.pk).first()  # versions in order, one at a time
        latest = RoutingPolicy.objects.filter(team=team).aggregate(latest=Max("version"))["latest"] or 0
        policy = chain_append(
            RoutingPolicy(team=team, version=latest + 1, document=parsed, note=note[:300], created_by=user),
            kind=POLICY_VERSIONS,
        )
    policy_cache_forget(team.pk)
    return policy
