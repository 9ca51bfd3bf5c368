"""Saving a routing policy: a new version when valid; every problem at its JSON path and the
version in force kept when not."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from playground.providers.models import ProviderConnection
from playground.routing import selectors
from playground.routing.models import RoutingPolicy
from playground.routing.problems import PolicyInvalid
from playground.routing.schema import POLICY_SCHEMA
from playground.routing.selectors import routing_policy_current, routing_policy_flags, team_routing
from playground.routing.services import routing_policy_save
from tests.routing.conftest import KIMI, LLAMA
from tests.support.actors import Actors

pytestmark = pytest.mark.django_db

VALID = {
    "rules": [
        {
            "name": "extraction",
            "when": {"tags_any": ["extraction"]},
            "strategy": "fallback",
            "targets": [{"connection": "Primary", "model": LLAMA}, {"connection": "Backup", "model": KIMI}],
        }
    ],
    "aliases": {"smart": {"connection": "Primary", "model": KIMI}},
}


def problems_of(actors: Actors, document: object) -> dict[str, str]:
    with pytest.raises(PolicyInvalid) as refused:
        routing_policy_save(team=actors.team, document=document, user=actors.owner)
    return {problem.path: problem.message for problem in refused.value.problems}


def test_a_valid_policy_becomes_the_next_version_in_force(
    actors: Actors, primary: ProviderConnection, backup: ProviderConnection
) -> None:
    first = routing_policy_save(team=actors.team, document=json.dumps(VALID), user=actors.owner, note="start")
    second = routing_policy_save(
        team=actors.team, document={**VALID, "sticky_sessions": True}, user=actors.admin
    )
    assert (first.version, second.version) == (1, 2)
    assert routing_policy_current(actors.team.pk) == second
    routing = team_routing(actors.team.pk)
    assert routing is not None and routing.version == 2 and routing.policy.sticky_sessions
    assert routing.connections["Backup"].connection_id == backup.pk
    assert routing_policy_current(actors.other_team.pk) is None


def test_every_problem_is_reported_at_its_path_and_the_version_in_force_stays(
    actors: Actors, primary: ProviderConnection, backup: ProviderConnection
) -> None:
    routing_policy_save(team=actors.team, document=VALID, user=actors.owner)
    broken = {
        "rules": [
            {"name": "a", "strategy": "sometimes", "targets": [{"connection": "Primary"}]},
            {"name": "b", "when": {"budget_used_above": 1.5}, "targets": []},
        ],
        "retries": {"attempts": 0},
    }
    problems = problems_of(actors, broken)
    assert set(problems) == {
        "$.rules[0].strategy",
        "$.rules[0].targets[0]",
        "$.rules[1].when.budget_used_above",
        "$.rules[1].targets",
        "$.retries.attempts",
    }
    assert "'model' is a required property" in problems["$.rules[0].targets[0]"]
    assert "1.5 is greater than the maximum of 1" in problems["$.rules[1].when.budget_used_above"]
    assert RoutingPolicy.objects.filter(team=actors.team).count() == 1
    current = routing_policy_current(actors.team.pk)
    assert current is not None and current.version == 1


def test_invalid_json_is_refused_with_its_line_and_column(actors: Actors) -> None:
    problems = problems_of(actors, '{"rules": [\n  {"name": "a",}\n]}')
    assert list(problems) == ["$"]
    assert "line 2" in problems["$"]


def test_connections_of_another_team_and_models_not_served_are_refused(
    actors: Actors, primary: ProviderConnection, backup: ProviderConnection
) -> None:
    ProviderConnection.objects.filter(pk=backup.pk).update(listed_models=[KIMI])
    document = {
        "rules": [
            {"name": "x", "targets": [{"connection": "Elsewhere", "model": KIMI}]},
            {"name": "x", "targets": [{"connection": "Backup", "model": LLAMA}]},
        ]
    }
    problems = problems_of(actors, document)
    assert "no connection named 'Elsewhere'" in problems["$.rules[0].targets[0].connection"]
    assert "Backup, Primary" in problems["$.rules[0].targets[0].connection"]
    assert problems["$.rules[1].targets[0].model"] == f"Backup does not serve '{LLAMA}'."
    assert "already the name of rule 0" in problems["$.rules[1].name"]


def test_a_connection_deleted_after_saving_is_flagged(
    actors: Actors, primary: ProviderConnection, backup: ProviderConnection
) -> None:
    routing_policy_save(team=actors.team, document=VALID, user=actors.owner)
    assert routing_policy_flags(actors.team.pk) == []
    backup.delete()
    flags = routing_policy_flags(actors.team.pk)
    assert [flag.path for flag in flags] == ["$.rules[0].targets[1].connection"]
    assert "'Backup', which no longer exists" in flags[0].message
    routing = team_routing(actors.team.pk)  # the deletion dropped the cached copy
    assert routing is not None and "Backup" not in routing.connections


def test_the_published_schema_file_is_the_one_enforced() -> None:
    published = Path(__file__).resolve().parents[2] / "docs" / "routing-policy.schema.json"
    assert json.loads(published.read_text()) == POLICY_SCHEMA


def test_an_alias_naming_an_alias_is_refused_as_the_chain_or_loop_it_is(
    actors: Actors, primary: ProviderConnection
) -> None:
    document = {
        "aliases": {
            "fast": {"connection": "Primary", "model": "fast"},
            "smart": [{"connection": "Primary", "model": KIMI}, {"connection": "Primary", "model": "fast"}],
            "cheap": {"connection": "Primary", "model": LLAMA},
        }
    }
    problems = problems_of(actors, document)
    assert set(problems) == {'$.aliases["fast"].model', '$.aliases["smart"][1].model'}
    assert "names itself" in problems['$.aliases["fast"].model']
    assert "names the alias 'fast'" in problems['$.aliases["smart"][1].model']
    assert routing_policy_current(actors.team.pk) is None


def test_a_version_saved_by_another_process_is_in_force_here_once_the_cache_expires(
    actors: Actors, primary: ProviderConnection, backup: ProviderConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(selectors, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    routing_policy_save(team=actors.team, document=VALID, user=actors.owner)
    first = team_routing(actors.team.pk)
    assert first is not None and first.version == 1
    # Another web process saves: its save drops its own copy, not this one's.
    RoutingPolicy.objects.create(team=actors.team, version=2, document={**VALID, "sticky_sessions": True})
    clock[0] += selectors.POLICY_TTL_SECONDS - 0.1
    assert team_routing(actors.team.pk) is first, "within the TTL: a dict look-up, no query"
    clock[0] += 0.2
    routing = team_routing(actors.team.pk)
    assert routing is not None and routing.version == 2 and routing.policy.sticky_sessions
