"""The team's audit page reads as sentences a person follows, not Python reprs."""

from __future__ import annotations

import html
import re

from playground.accounts.models import Role
from playground.teams.selectors import audit_detail_lines
from tests.support.actors import Actors
from tests.support.clients import client_for


def audit_details(actors: Actors) -> list[str]:
    page = client_for(actors.viewer).get(f"/teams/{actors.team.pk}/audit/").content.decode()
    cells = re.findall(r'<td class="small audit-detail">(.*?)</td>', page, re.S)
    return [html.unescape(line) for cell in cells for line in re.findall(r"<span>(.*?)</span>", cell)]


def test_a_role_change_reads_from_the_old_role_to_the_new(actors: Actors) -> None:
    target = actors.membership(actors.teammate)
    client_for(actors.admin).post(f"/teams/{actors.team.pk}/members/{target.pk}/role/", {"role": Role.ADMIN})

    assert audit_details(actors) == ["role: member → admin"]


def test_a_budget_change_names_what_changed_without_python_reprs(actors: Actors) -> None:
    client_for(actors.owner).post(
        f"/teams/{actors.team.pk}/budgets/",
        {"monthly_limit_usd": "10", "alert_thresholds": "50, 80", "time_zone": "UTC"},
    )
    target = actors.membership(actors.teammate)
    client_for(actors.owner).post(
        f"/teams/{actors.team.pk}/budgets/members/{target.pk}/", {"monthly_budget_usd": "3.50"}
    )

    details = audit_details(actors)

    assert details == [
        "limit (USD): none → 3.50",
        "limit (USD): none → 10.00",
        "thresholds: none → 50, 80",
        "time zone: UTC",
    ]
    assert not any(mark in line for line in details for mark in ("{", "[", "None", "'"))


def test_details_without_a_previous_value_are_listed_as_they_are() -> None:
    assert audit_detail_lines(
        {"kind": "openai-compatible", "base_url": "https://x.example/v1", "token": "replaced", "ok": True}
    ) == ["base URL: https://x.example/v1", "kind: openai-compatible", "ok: yes", "token: replaced"]


def test_a_previous_value_with_several_other_keys_is_listed_not_guessed() -> None:
    assert audit_detail_lines({"previous": "a", "one": "b", "two": "c"}) == [
        "one: b",
        "previous: a",
        "two: c",
    ]
