"""Routing decisions on the Usage pages: the record page shows the rule, every attempt (linked to
its own record), the final target and a downgrade; the log filters by rule, "fell back" and
"downgraded"; FOCUS says it cannot select them."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse

from playground.analytics.selectors.focus import focus_unserved
from playground.analytics.selectors.request_log import log_records
from playground.analytics.selectors.routing_outcomes import routing_outcomes
from playground.routing.services import routing_policy_save
from playground.usage.models import UsageRecord, UsageStatus
from tests.support.actors import Actors
from tests.support.analytics import NOW, filters_for
from tests.support.clients import client_for
from tests.support.clock import clock

pytestmark = pytest.mark.django_db
KIMI = "@cf/moonshotai/kimi-k2.5"


def routed_request(
    actors: Actors, *, rule: str, downgrade: dict[str, Any] | None = None
) -> list[UsageRecord]:
    """A request whose first attempt failed (503) and whose second answered: two records."""
    ids = [uuid.uuid4(), uuid.uuid4()]
    attempts: list[dict[str, Any]] = [
        {"target": f"Primary/{KIMI}", "request_id": str(ids[0]), "status": 503, "ms": 120, "moved_on": "503"},
        {"target": f"Backup/{KIMI}", "request_id": str(ids[1]), "status": None, "ms": 900, "moved_on": ""},
    ]
    at = NOW - dt.timedelta(hours=1)
    records = []
    for index, request_id in enumerate(ids):
        record = UsageRecord.objects.create(
            request_id=request_id,
            status=UsageStatus.UPSTREAM_ERROR if index == 0 else UsageStatus.OK,
            route_rule=rule,
            route_fell_back=index == 1,
            route_downgraded=downgrade is not None,
            routing={
                "policy_version": 2,
                "rule": rule,
                "attempt": index + 1,
                "attempts": attempts[: index + 1],
                "final": attempts[index]["target"] if index == 1 else None,
                "requested_model": "smart",
                "downgrade": downgrade,
                "affinity_added": True,
            },
            team=actors.team,
            model_id=KIMI,
            path="gateway",
        )
        UsageRecord.objects.filter(pk=record.pk).update(created_at=at)
        records.append(record)
    return records


def test_the_record_page_shows_the_decision_and_links_each_attempt(actors: Actors) -> None:
    failed, answered = routed_request(
        actors, rule="main", downgrade={"reason": "budget_cannot_cover", "requested": f"Primary/{KIMI}"}
    )
    page = client_for(actors.owner).get(reverse("analytics:record-detail", args=[answered.request_id]))
    text = page.content.decode()
    assert page.status_code == 200 and "Routing decision" in text
    assert "<strong>main</strong>" in text and "(policy version 2)" in text
    assert f"<code>Backup/{KIMI}</code>" in text and "<code>smart</code>" in text
    assert "the upstream answered 503" in text and "the budget could not cover the target" in text
    assert reverse("analytics:record-detail", args=[failed.request_id]) in text  # attempt 1, linked
    assert "(this record)" in text and "added by the gateway from the session" in text
    outsider = client_for(actors.outsider).get(reverse("analytics:record-detail", args=[answered.request_id]))
    assert outsider.status_code == 404

    UsageRecord.objects.filter(pk=answered.pk).update(
        routing={**(answered.routing or {}), "session_inferred": True}
    )
    page = client_for(actors.owner).get(reverse("analytics:record-detail", args=[answered.request_id]))
    assert "added by the gateway from a session inferred from the messages" in page.content.decode()


def test_the_log_filters_by_rule_fell_back_and_downgraded(actors: Actors) -> None:
    main = routed_request(actors, rule="main")
    cheap = routed_request(actors, rule="cheap", downgrade={"reason": "budget_used_above", "requested": "x"})
    plain = UsageRecord.objects.create(team=actors.team, model_id=KIMI, status="ok")
    UsageRecord.objects.filter(pk=plain.pk).update(created_at=NOW - dt.timedelta(hours=1))

    def ids(**params: str) -> set[int]:
        return set(log_records(filters_for(actors.owner, **params)).values_list("pk", flat=True))

    assert ids(route="main") == {record.pk for record in main}
    assert ids(routed="fell_back") == {main[1].pk, cheap[1].pk}
    assert ids(routed="downgraded") == {record.pk for record in cheap}
    assert ids(route="cheap", routed="fell_back") == {cheap[1].pk}
    assert plain.pk in ids() and plain.pk not in ids(routed="fell_back")
    assert "routing rule" in focus_unserved(filters_for(actors.owner, route="main"))


def test_the_log_offers_the_rules_of_the_teams_policies(actors: Actors, workers_connection: Any) -> None:
    policy = {
        "rules": [{"name": "extraction", "targets": [{"connection": "Workers AI (fake)", "model": KIMI}]}]
    }
    routing_policy_save(team=actors.team, document=policy, user=actors.owner)
    text = client_for(actors.owner).get(reverse("analytics:log")).content.decode()
    assert '<option value="extraction">extraction</option>' in text
    assert 'name="routed"' in text


def test_the_dashboard_counts_retries_fallbacks_causes_downgrades_and_ttft_by_tag(actors: Actors) -> None:
    routed_request(actors, rule="main")  # fell back after a 503, answered
    downgraded = routed_request(
        actors,
        rule="cheap",
        downgrade={"reason": "budget_used_above", "requested": f"Primary/{KIMI}", "requested_model_id": KIMI},
    )
    UsageRecord.objects.filter(pk=downgraded[1].pk).update(
        prompt_tokens=1_000_000, completion_tokens=0, total_cost=Decimal("0.10"), ttft_ms=400, tags=",batch,"
    )
    for ttft in (100, 200, 300):
        tagged = UsageRecord.objects.create(
            team=actors.team, model_id=KIMI, status="ok", ttft_ms=ttft, tags=",chat,"
        )
        UsageRecord.objects.filter(pk=tagged.pk).update(created_at=NOW - dt.timedelta(hours=1))

    with clock(NOW):
        outcomes = routing_outcomes(filters_for(actors.owner))

    assert outcomes.requests == 2
    assert (outcomes.retried.requests, outcomes.retried.succeeded) == (2, 2)
    assert (outcomes.fell_back.requests, outcomes.fell_back.succeeded) == (2, 2)
    assert outcomes.moved_on == [("503", 2)]
    assert outcomes.downgraded == 1
    assert outcomes.downgrade_requested_usd == Decimal("0.95")  # a million fresh input tokens of K2.6
    assert outcomes.downgrade_moved_usd == Decimal("0.85")
    assert [(row.tag, row.requests, row.p50_ms, row.p95_ms) for row in outcomes.by_tag] == [
        ("chat", 3, 200, 300),
        ("batch", 1, 400, 400),
    ]
    with clock(NOW):
        page = client_for(actors.owner).get(reverse("analytics:routing"), {"range": "24h"})
    text = page.content.decode()
    assert page.status_code == 200 and "$0.85" in text and 'id="ttft-by-tag"' in text


def test_the_routing_panel_says_what_to_do_when_nothing_was_routed(actors: Actors) -> None:
    text = client_for(actors.owner).get(reverse("analytics:routing")).content.decode()
    assert "No routed requests in this period" in text and "Team → Routing" in text
