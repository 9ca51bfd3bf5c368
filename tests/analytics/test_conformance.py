"""The dashboard's schema conformance: records the writer judged, grouped by model, schema name and
preset version, with their shares and commonest error paths, for the filters and the team only."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.urls import reverse

from playground.analytics.selectors.conformance import ConformanceRow, schema_conformance
from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26
from playground.presets.models import Preset, PresetVersion
from playground.providers.structured_answers import answer_format
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.calls.context import RequestContext
from playground.usage.metering import Outcome
from playground.usage.models import UsageRecord, UsageSource, UsageStatus
from playground.usage.records import usage_record_create
from tests.support.actors import Actors
from tests.support.analytics import NOW, filters_for
from tests.support.clients import client_for
from tests.support.clock import clock

pytestmark = pytest.mark.django_db

AT = NOW - dt.timedelta(hours=2)
INVOICE = {
    "type": "json_schema",
    "json_schema": {
        "name": "invoice",
        "schema": {
            "type": "object",
            "properties": {"total": {"type": "number"}, "currency": {"type": "string"}},
            "required": ["total", "currency"],
        },
    },
}
VALID = '{"total": 3, "currency": "EUR"}'
BAD_TOTAL = '{"total": "3", "currency": "EUR"}'
NO_CURRENCY = '{"total": 3}'


def answered(
    actors: Actors,
    text: str,
    *,
    response_format: dict[str, Any] | None = INVOICE,
    model_id: str = KIMI_K26,
    team: Any = None,
    status: str = UsageStatus.OK,
    at: dt.datetime = AT,
    **context: Any,
) -> UsageRecord:
    """A record as the metered call writes one: the answer's text kept when a JSON format was asked."""
    asked = answer_format(response_format)
    outcome = Outcome(
        status=status,
        usage=NormalizedUsage(prompt_tokens=20, completion_tokens=10),
        usage_source=UsageSource.PROVIDER,
        ttft_ms=100,
        latency_ms=400,
        answer_text=text if asked is not None else None,
    )
    request = RequestContext(
        team_id=(team or actors.team).pk,
        user_id=actors.owner.pk,
        connection_id=None,
        model_id=model_id,
        answer_format=asked,
        **context,
    )
    with clock(at):
        return usage_record_create(context=request, outcome=outcome)


@pytest.fixture
def version(actors: Actors) -> PresetVersion:
    preset = Preset.objects.create(team=actors.team, name="Billing")
    return PresetVersion.objects.create(preset=preset, number=2, model_id=KIMI_K26, setup={})


def test_the_writer_judges_only_whole_answers_to_requests_that_asked_for_json(actors: Actors) -> None:
    bad = answered(actors, BAD_TOTAL)
    assert (bad.schema_name, bad.schema_valid) == ("invoice", False)
    assert bad.schema_errors == [{"path": "$.total", "message": "'3' is not of type 'number'"}]
    any_object = answered(actors, "[1, 2]", response_format={"type": "json_object"})
    assert (any_object.schema_name, any_object.schema_valid) == ("json_object", False)

    cut_short = answered(actors, '{"total": 3, "curr', status=UsageStatus.CLIENT_DISCONNECTED)
    assert (cut_short.schema_name, cut_short.schema_valid, cut_short.schema_errors) == ("invoice", None, None)
    only_tools = answered(actors, "")
    assert only_tools.schema_valid is None
    text = answered(actors, "Hello!", response_format=None)
    assert (text.schema_name, text.schema_valid) == ("", None)


def test_answers_are_grouped_by_model_schema_and_preset_version_with_their_share_and_commonest_paths(
    actors: Actors, version: PresetVersion
) -> None:
    for text in (VALID, BAD_TOTAL, NO_CURRENCY, NO_CURRENCY, '{"total": "x"}'):
        answered(actors, text, preset_version_id=version.pk)
    answered(actors, VALID)  # the same model and schema without a preset: a row of its own
    answered(actors, "not json", model_id=ENGINE_MODEL_ID, response_format={"type": "json_object"})
    answered(actors, "Plain text", response_format=None)  # asked for no format: not counted
    answered(actors, BAD_TOTAL, team=actors.other_team)  # another team's

    rows = schema_conformance(filters_for(actors.owner)).rows

    assert rows == [  # the most answers first, then by model id
        ConformanceRow(
            model_id=KIMI_K26,
            schema_name="invoice",
            preset_version_id=version.pk,
            preset_label="Billing v2",
            answers=5,
            valid=1,
            # '{"total": "x"}' breaks both; each invalid answer counts a path once
            error_paths=[("$", 3), ("$.total", 2)],
        ),
        ConformanceRow(
            model_id=KIMI_K26,
            schema_name="invoice",
            preset_version_id=None,
            preset_label="",
            answers=1,
            valid=1,
            error_paths=[],
        ),
        ConformanceRow(
            model_id=ENGINE_MODEL_ID,
            schema_name="json_object",
            preset_version_id=None,
            preset_label="",
            answers=1,
            valid=0,
            error_paths=[("$", 1)],
        ),
    ]
    assert rows[0].share_valid == pytest.approx(0.2)


def test_the_dashboards_filters_apply(actors: Actors) -> None:
    answered(actors, BAD_TOTAL)
    answered(actors, VALID, model_id=ENGINE_MODEL_ID)
    answered(actors, BAD_TOTAL, at=NOW - dt.timedelta(days=3))  # before the last 24 hours

    by_model = schema_conformance(filters_for(actors.owner, model=ENGINE_MODEL_ID)).rows
    assert [(row.model_id, row.answers, row.valid) for row in by_model] == [(ENGINE_MODEL_ID, 1, 1)]
    whole_day = schema_conformance(filters_for(actors.owner)).rows
    assert sum(row.answers for row in whole_day) == 2
    week = schema_conformance(filters_for(actors.owner, range="7d")).rows
    assert sum(row.answers for row in week) == 3


def test_the_dashboard_shows_the_table_to_a_member_and_a_clear_empty_state_otherwise(
    actors: Actors, version: PresetVersion
) -> None:
    url = reverse("analytics:conformance")
    with clock(NOW):
        page = client_for(actors.teammate).get(reverse("analytics:dashboard"), {"range": "24h"})
        empty = client_for(actors.teammate).get(url, {"range": "24h"})
    assert b'id="conformance"' in page.content and url.encode() in page.content
    assert b"No structured answers in this period" in empty.content

    answered(actors, NO_CURRENCY, preset_version_id=version.pk)
    answered(actors, VALID, preset_version_id=version.pk)
    with clock(NOW):
        fragment = client_for(actors.teammate).get(url, {"range": "24h"})

    html = fragment.content.decode()
    assert fragment.status_code == 200
    assert html.count("data-conformance-row") == 1
    assert "<code>invoice</code>" in html and "Billing v2" in html
    assert "50.0%" in html and "<code>$</code> \u00d7 1" in html
    assert "No structured answers" not in html


def test_another_teams_conformance_is_a_404(actors: Actors) -> None:
    response = client_for(actors.outsider).get(
        reverse("analytics:conformance"), {"team": str(actors.team.pk), "range": "24h"}
    )

    assert response.status_code == 404
