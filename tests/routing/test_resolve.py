"""The plan a policy makes: first matching rule, aliases, weighted picks that stick, cooling
targets last, budget downgrades, and a rule whose connection is gone."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from playground.providers.models import ProviderConnection
from playground.routing.plan import RequestFacts, RoutePlan, Target
from playground.routing.problems import RouteUnavailable
from playground.routing.resolve import route_for_request
from playground.routing.services import routing_policy_save
from tests.routing.conftest import KIMI, LLAMA
from tests.support.actors import Actors

pytestmark = pytest.mark.django_db


def target(connection: ProviderConnection, model: str) -> Target:
    return Target(connection_id=connection.pk, connection_name=connection.name, model=model)


@pytest.fixture
def default(primary: ProviderConnection) -> Target:
    return target(primary, KIMI)


def plan(actors: Actors, default: Target, facts: RequestFacts, **options: Any) -> RoutePlan:
    made = route_for_request(team_id=actors.team.pk, default=default, facts=facts, **options)
    assert made is not None
    return made


def save(actors: Actors, document: dict[str, Any]) -> None:
    routing_policy_save(team=actors.team, document=document, user=actors.owner)


def test_no_policy_makes_no_plan(actors: Actors, default: Target) -> None:
    assert route_for_request(team_id=actors.team.pk, default=default, facts=RequestFacts(model=KIMI)) is None


def test_the_first_matching_rule_wins_and_no_match_goes_to_the_keys_connection(
    actors: Actors, default: Target, primary: ProviderConnection, backup: ProviderConnection
) -> None:
    save(
        actors,
        {
            "rules": [
                {
                    "name": "big",
                    "when": {"prompt_tokens_above": 20000, "stream": False},
                    "targets": [{"connection": "Backup", "model": KIMI}],
                },
                {
                    "name": "free-tier",
                    "when": {"metadata": {"tier": "free"}, "tags_any": ["extraction", "summary"]},
                    "on": [429, "timeout"],
                    "targets": [
                        {"connection": "Primary", "model": LLAMA},
                        {"connection": "Backup", "model": LLAMA},
                    ],
                },
            ]
        },
    )
    free = RequestFacts(
        model=KIMI, tags=("summary",), metadata={"tier": "free", "team": "x"}, prompt_tokens=100
    )
    matched = plan(actors, default, free)
    assert matched.rule == "free-tier" and matched.policy_version == 1
    assert matched.targets == (target(primary, LLAMA), target(backup, LLAMA))
    assert matched.on == frozenset({429, "timeout"})
    assert plan(actors, default, RequestFacts(model=KIMI, prompt_tokens=30000)).rule == "big"
    assert plan(actors, default, RequestFacts(model=KIMI, prompt_tokens=30000, stream=True)).targets == (
        default,
    )
    unmatched = plan(actors, default, RequestFacts(model=KIMI, tags=("other",), metadata={"tier": "free"}))
    assert (unmatched.rule, unmatched.targets) == ("", (default,))


def test_an_alias_names_targets_in_order_and_rules_match_the_alias(
    actors: Actors, default: Target, primary: ProviderConnection, backup: ProviderConnection
) -> None:
    save(
        actors,
        {
            "aliases": {
                "fast": [{"connection": "Backup", "model": LLAMA}, {"connection": "Primary", "model": LLAMA}]
            },
            "rules": [
                {
                    "name": "pinned",
                    "when": {"model": "fast", "end_user": "u-1"},
                    "targets": [{"connection": "Primary", "model": KIMI}],
                }
            ],
        },
    )
    assert plan(actors, default, RequestFacts(model="fast")).targets == (
        target(backup, LLAMA),
        target(primary, LLAMA),
    )
    assert plan(actors, default, RequestFacts(model="fast", end_user="u-1")).rule == "pinned"


WEIGHTED = {
    "sticky_sessions": True,
    "rules": [
        {
            "name": "split",
            "strategy": "weighted",
            "targets": [
                {"connection": "Primary", "model": KIMI, "weight": 3},
                {
                    "strategy": "fallback",
                    "weight": 1,
                    "targets": [
                        {"connection": "Backup", "model": KIMI},
                        {"connection": "Primary", "model": LLAMA},
                    ],
                },
            ],
        }
    ],
}


def test_a_weighted_split_follows_its_weights_and_a_sticky_session_stays(
    actors: Actors, default: Target, primary: ProviderConnection, backup: ProviderConnection
) -> None:
    save(actors, WEIGHTED)
    rng = random.Random(5)
    picks = Counter(plan(actors, default, RequestFacts(model=KIMI), rng=rng).targets for _ in range(400))
    assert set(picks) == {(target(primary, KIMI),), (target(backup, KIMI), target(primary, LLAMA))}
    assert 0.65 < picks[(target(primary, KIMI),)] / 400 < 0.85  # 3 to 1
    stuck = {
        plan(actors, default, RequestFacts(model=KIMI), sticky=target(backup, KIMI), rng=rng).targets
        for _ in range(50)
    }
    assert stuck == {(target(backup, KIMI), target(primary, LLAMA))}
    assert plan(actors, default, RequestFacts(model=KIMI)).sticky


def test_cooling_targets_go_last_and_a_cooling_sticky_target_is_not_kept(
    actors: Actors, default: Target, primary: ProviderConnection, backup: ProviderConnection
) -> None:
    save(actors, WEIGHTED)
    cooling_backup = lambda t: t.connection_name == "Backup"  # noqa: E731
    seen = set()
    for _ in range(60):
        made = plan(
            actors, default, RequestFacts(model=KIMI), sticky=target(backup, KIMI), cooling=cooling_backup
        )
        seen.add(made.targets)
    # The sticky target is cooling: the split picks again, and the cooling target goes last.
    assert seen == {(target(primary, KIMI),), (target(primary, LLAMA), target(backup, KIMI))}
    save(
        actors,
        {
            "rules": [
                {
                    "name": "f",
                    "targets": [
                        {"connection": "Backup", "model": KIMI},
                        {"connection": "Primary", "model": KIMI},
                    ],
                }
            ]
        },
    )
    made = plan(actors, default, RequestFacts(model=KIMI), cooling=cooling_backup)
    assert made.targets == (target(primary, KIMI), target(backup, KIMI))


def test_past_the_budget_threshold_a_tagged_request_is_downgraded_and_says_from_what(
    actors: Actors, default: Target, primary: ProviderConnection, backup: ProviderConnection
) -> None:
    save(
        actors,
        {
            "rules": [
                {
                    "name": "cheaper-when-late",
                    "when": {"tags_any": ["non-critical"], "budget_used_above": 0.8},
                    "targets": [{"connection": "Backup", "model": LLAMA}],
                    "when_budget_cannot_cover": {"connection": "Backup", "model": LLAMA},
                },
                {"name": "default", "targets": [{"connection": "Primary", "model": KIMI}]},
            ]
        },
    )
    asked: list[str] = []

    def used(share: float) -> Callable[[], float]:
        def read() -> float:
            asked.append("read")
            return share

        return read

    tagged = RequestFacts(model=KIMI, tags=("non-critical",))
    late = plan(actors, default, tagged, budget_used=used(0.85))
    assert late.rule == "cheaper-when-late" and late.targets == (target(backup, LLAMA),)
    assert late.downgrade is not None and late.downgrade.reason == "budget_used_above"
    assert late.downgrade.requested == target(primary, KIMI)
    assert late.budget_fallback == target(backup, LLAMA)
    early = plan(actors, default, tagged, budget_used=used(0.5))
    assert (early.rule, early.downgrade) == ("default", None)
    untagged = plan(actors, default, RequestFacts(model=KIMI), budget_used=used(0.95))
    assert untagged.rule == "default"
    assert asked == ["read"] * 3  # read once per request, since a rule looks at it


def test_a_budget_rule_that_calls_what_was_asked_for_anyway_is_no_downgrade(
    actors: Actors, default: Target, primary: ProviderConnection
) -> None:
    save(
        actors,
        {
            "rules": [
                {
                    "name": "late-but-same",
                    "when": {"budget_used_above": 0.8},
                    "targets": [{"connection": "Primary", "model": KIMI}],
                }
            ]
        },
    )
    late = plan(actors, default, RequestFacts(model=KIMI), budget_used=lambda: 0.9)
    assert (late.rule, late.targets, late.downgrade) == ("late-but-same", (default,), None)


def test_a_rule_whose_connection_was_deleted_cannot_route(
    actors: Actors, default: Target, primary: ProviderConnection, backup: ProviderConnection
) -> None:
    save(actors, {"rules": [{"name": "to-backup", "targets": [{"connection": "Backup", "model": KIMI}]}]})
    backup.delete()
    with pytest.raises(RouteUnavailable) as unavailable:
        plan(actors, default, RequestFacts(model=KIMI))
    assert unavailable.value.rule == "to-backup"
    assert "'Backup', which no longer exists" in str(unavailable.value)
