"""`manage.py routing_policy`: show, save (or refuse with every problem), and dry-run."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from playground.providers.models import ProviderConnection
from playground.routing.selectors import routing_policy_current
from playground.usage.models import UsageRecord
from tests.routing.conftest import KIMI
from tests.support.actors import Actors

pytestmark = pytest.mark.django_db
CHEAP = "@cf/openai/gpt-oss-20b"


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("routing_policy", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def write(tmp_path: Path, name: str, value: object) -> str:
    path = tmp_path / name
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return str(path)


POLICY = {
    "rules": [
        {
            "name": "late-month",
            "when": {"tags_any": ["batch"], "budget_used_above": 0.8},
            "targets": [{"connection": "Backup", "model": CHEAP}],
        },
        {
            "name": "default",
            "targets": [{"connection": "Primary", "model": KIMI}, {"connection": "Backup", "model": KIMI}],
        },
    ]
}


def test_a_policy_is_saved_shown_and_a_broken_one_refused_at_its_paths(
    tmp_path: Path, actors: Actors, primary: ProviderConnection, backup: ProviderConnection
) -> None:
    out, _ = run("--team", "Alpha", "--file", write(tmp_path, "p.json", POLICY), "--note", "first")
    assert "Version 1 of Alpha's routing policy is in force." in out
    shown, said = run("--team", str(actors.team.pk), "--show")
    assert json.loads(shown) == POLICY and "Version 1 of Alpha, by manage.py" in said

    broken = {"rules": [{"name": "x", "targets": [{"connection": "Nowhere", "model": KIMI}]}], "extra": 1}
    err = io.StringIO()
    with pytest.raises(CommandError, match=r"1 problem\(s\): nothing saved, version 1 stays in force"):
        call_command(
            "routing_policy", "--team", "Alpha", "--file", write(tmp_path, "b.json", broken), stderr=err
        )
    assert "$: Additional properties are not allowed ('extra' was unexpected)" in err.getvalue()
    err = io.StringIO()
    with pytest.raises(CommandError):  # the team's facts are checked once the shape is right
        call_command(
            "routing_policy",
            "--team",
            "Alpha",
            "--file",
            write(tmp_path, "c.json", {"rules": broken["rules"]}),
            stderr=err,
        )
    assert "$.rules[0].targets[0].connection: The team has no connection named 'Nowhere'" in err.getvalue()
    current = routing_policy_current(actors.team.pk)
    assert current is not None and current.version == 1


def test_a_dry_run_prints_the_rule_the_targets_costs_in_decimals_and_what_a_session_would_lose(
    tmp_path: Path, actors: Actors, primary: ProviderConnection, backup: ProviderConnection
) -> None:
    run("--team", "Alpha", "--file", write(tmp_path, "p.json", POLICY))
    UsageRecord.objects.create(
        team=actors.team,
        connection=backup,
        model_id=KIMI,
        session="s-9",
        status="ok",
        prompt_tokens=40_000,
        completion_tokens=1_000,
    )
    sample = {"model": KIMI, "session": "s-9", "prompt_tokens": 50, "completion_tokens": 10}
    out, _ = run("--team", "Alpha", "--dry-run", write(tmp_path, "s.json", sample))
    lines = out.splitlines()
    assert lines[0] == "Policy version 1: rule 'default' matches."
    assert lines[1].startswith(f"  1. Primary/{KIMI}: $0.0000") and "e-" not in out
    assert lines[2].startswith(f"  2. Backup/{KIMI}: $")
    assert f"The session last ran on Backup/{KIMI}: moving loses its cached prefix of 41,000 tokens" in out

    late = {"model": KIMI, "tags": ["batch"], "budget_used": 0.9}
    out, _ = run("--team", "Alpha", "--dry-run", write(tmp_path, "l.json", late))
    assert "rule 'late-month' matches" in out
    assert f"Downgraded (budget_used_above) from Primary/{KIMI}." in out

    with pytest.raises(CommandError, match="Not a sample request"):
        run("--team", "Alpha", "--dry-run", write(tmp_path, "x.json", "{not json"))
