"""Scores on the record page (people's, given and changed in place), the request log's filter and
badge by score, and the dashboard's chart of scores by preset version, whose figures are the
stored scores'."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest
from django.urls import reverse

from playground.analytics.filters import FilterError
from playground.analytics.selectors.request_log import log_page
from playground.analytics.selectors.scores import scores_by_preset_version
from playground.analytics.selectors.totals import log_totals
from playground.presets.models import Preset, PresetVersion
from playground.usage.models import Score, ScoreKind, ScoreOrigin, UsageRecord
from playground.usage.scores import ScoreInput, score_put_by_key, score_put_by_person
from tests.support.analytics import NOW, GatewayKnown, Known, filters_for
from tests.support.clients import client_for
from tests.support.clock import clock

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


def _url(record: UsageRecord) -> str:
    return reverse("analytics:record-score", args=[record.request_id])


def test_a_member_scores_a_record_on_its_page_and_changes_their_score_in_place(
    actors: Any, known: Known
) -> None:
    record = known.records[0]
    owner = client_for(actors.owner)
    page = owner.get(reverse("analytics:record-detail", args=[record.request_id])).content.decode()
    assert "No scores yet" in page and f'hx-post="{_url(record)}"' in page

    with clock(NOW):
        given = owner.post(_url(record), {"score": "up", "comment": "Right <b>answer</b>"}, headers=HTMX)
    assert given.status_code == 200
    html = given.content.decode()
    assert html.strip().startswith('<section class="panel detail-wide" id="scores"')
    assert "▲ Thumbs up" in html and 'owner <span class="muted">(you)</span>' in html
    assert "Right &lt;b&gt;answer&lt;/b&gt;" in html  # escaped
    assert "2026-11-20 12:00 UTC" in html and "Change my score" in html
    score = Score.objects.get()
    assert (score.origin, score.user_id, score.kind, score.value, score.team_id) == (
        ScoreOrigin.PERSON,
        actors.owner.pk,
        ScoreKind.THUMBS,
        1,
        actors.team.pk,
    )

    # A viewer scores too; then the owner changes theirs to a rating: still one row each.
    assert client_for(actors.viewer).post(_url(record), {"score": "down"}, headers=HTMX).status_code == 200
    with clock(NOW.replace(hour=13)):
        changed = owner.post(_url(record), {"score": "2", "comment": ""}, headers=HTMX).content.decode()
    assert Score.objects.count() == 2
    mine = Score.objects.get(user=actors.owner)
    assert (mine.pk, mine.kind, mine.value, mine.comment) == (score.pk, ScoreKind.RATING, 2, "")
    assert "2/5 ★" in changed and "▼ Thumbs down" in changed and "13:00 UTC · changed" in changed
    assert 'id="score-2" checked' in changed  # the form shows the person's own score

    # The viewer's page shows both, with the viewer's own thumb chosen.
    seen = client_for(actors.viewer).get(reverse("analytics:record-detail", args=[record.request_id]))
    assert 'id="score-down" checked' in seen.content.decode() and "2/5 ★" in seen.content.decode()

    removed = owner.post(_url(record), {"action": "remove"}, headers=HTMX).content.decode()
    assert list(Score.objects.values_list("user_id", flat=True)) == [actors.viewer.pk]
    assert "Save score" in removed


def test_a_bad_score_is_shown_on_the_form_and_stores_nothing(actors: Any, known: Known) -> None:
    record = known.records[0]
    client = client_for(actors.teammate)

    none = client.post(_url(record), {"comment": "no pick"}, headers=HTMX).content.decode()
    out_of_range = client.post(_url(record), {"score": "9"}, headers=HTMX).content.decode()
    long = client.post(_url(record), {"score": "3", "comment": "x" * 2001}, headers=HTMX).content.decode()
    plain = client.post(_url(record), {"score": "9"})  # without htmx: the app's error page

    assert "Pick a thumb or a rating." in none
    assert "Select a valid choice. 9 is not one of the available choices." in out_of_range
    assert "at most 2000 characters" in long
    assert plain.status_code == 400 and b"Select a valid choice" in plain.content
    assert Score.objects.count() == 0
    assert client.post(_url(record), {"score": "3"}).status_code == 302  # saved, back to the page
    assert Score.objects.get().value == 3


def test_another_teams_record_cannot_be_scored_or_seen_scored(actors: Any, known: Known) -> None:
    bravo_record = known.records[3]
    score_put_by_person(
        user_id=actors.outsider.pk, record=bravo_record, given=ScoreInput(ScoreKind.THUMBS, 0, "secret")
    )

    answer = client_for(actors.owner).post(_url(bravo_record), {"score": "up"}, headers=HTMX)

    assert answer.status_code == 404
    assert Score.objects.count() == 1
    assert client_for(None).post(_url(known.records[0]), {"score": "up"}).status_code == 302  # to login
    with clock(NOW):
        log = client_for(actors.owner).get(reverse("analytics:log"), {"range": "24h", "score": "any"})
    assert "secret" not in log.content.decode() and log.context["page"].records == []


def _scored(actors: Any, known: Known, gateway: GatewayKnown) -> None:
    """Alpha's records 0-2 and G1 scored (and Bravo's record 3, which Alpha never sees):

    record 0: owner thumbs down · record 1: teammate rating 2 · record 2: owner rating 5, teammate
    thumbs up, shop-bot rating 4 "accuracy" · G1: shop-bot thumbs up."""
    r0, r1, r2, bravo = known.records

    def person(user: Any, record: UsageRecord, kind: str, value: int) -> None:
        score_put_by_person(user_id=user.pk, record=record, given=ScoreInput(kind, value))

    person(actors.owner, r0, ScoreKind.THUMBS, 0)
    person(actors.teammate, r1, ScoreKind.RATING, 2)
    person(actors.owner, r2, ScoreKind.RATING, 5)
    person(actors.teammate, r2, ScoreKind.THUMBS, 1)
    person(actors.outsider, bravo, ScoreKind.THUMBS, 0)
    score_put_by_key(
        key=gateway.shop_bot,
        request_id=str(r2.request_id),
        given=ScoreInput(ScoreKind.RATING, 4, "", "accuracy"),
    )
    score_put_by_key(
        key=gateway.shop_bot,
        request_id=str(gateway.records[0].request_id),
        given=ScoreInput(ScoreKind.THUMBS, 1),
    )


@pytest.mark.parametrize(
    ("score", "expected"),
    [
        ("any", {0, 1, 2, "G1"}),
        ("down", {0}),
        ("up", {2, "G1"}),
        ("rating_le_1", set()),
        ("rating_le_2", {1}),
        ("rating_le_4", {1, 2}),  # record 2's key gave it a 4, beside the owner's 5
        ("rating_le_5", {1, 2}),
    ],
)
def test_the_log_filters_by_score_and_its_totals_count_the_same_records(
    actors: Any, known: Known, gateway: GatewayKnown, score: str, expected: set[Any]
) -> None:
    _scored(actors, known, gateway)
    names = {record.pk: index for index, record in enumerate(known.records)} | {gateway.records[0].pk: "G1"}
    filters = filters_for(actors.owner, score=score)

    records = log_page(filters).records
    totals = log_totals(filters)

    assert {names[record.pk] for record in records} == expected
    assert totals.requests == len(records) and totals.prompt_tokens == sum(r.prompt_tokens for r in records)


def test_the_log_shows_each_records_scores_in_a_badge_and_refuses_an_unknown_score_filter(
    actors: Any, known: Known, gateway: GatewayKnown
) -> None:
    _scored(actors, known, gateway)
    with clock(NOW):
        html = client_for(actors.teammate).get(reverse("analytics:log"), {"range": "24h"}).content.decode()

    assert html.count('class="badge score-badge') == 4
    detail = reverse("analytics:record-detail", args=[known.records[2].request_id])
    assert f'<a href="{detail}#scores" class="badge score-badge"' in html
    assert "▲1 · 4.5★</a>" in html  # record 2: a thumb up, ratings 5 and 4
    assert 'score-badge score-low" title="Scores: 0 up, 1 down, 0 ratings">▼1</a>' in html  # record 0
    assert '<option value="rating_le_3">Rating ≤ 3</option>' in html
    with pytest.raises(FilterError):
        filters_for(actors.owner, score="rating_le_9")


def test_the_chart_by_preset_version_shows_the_stored_scores_mean_and_thumbs_up_share(
    actors: Any, known: Known, gateway: GatewayKnown
) -> None:
    triage = Preset.objects.create(team=actors.team, name="Triage")
    v1, v2 = (
        PresetVersion.objects.create(preset=triage, number=n, model_id="m", setup={"n": n}) for n in (1, 2)
    )
    r0, r1, r2, _ = known.records
    UsageRecord.objects.filter(pk__in=[r0.pk, r1.pk]).update(preset_version_id=v1.pk)
    UsageRecord.objects.filter(pk=r2.pk).update(preset_version_id=v2.pk)
    for record in known.records:
        record.refresh_from_db()
    _scored(actors, known, gateway)

    # What the stored scores say, summed here from the rows themselves.
    by_version: dict[Any, list[Score]] = defaultdict(list)
    for score in Score.objects.filter(team=actors.team).select_related("record"):
        by_version[score.record.preset_version_id].append(score)

    def expected(version_id: int | None) -> tuple[float | None, float | None, int]:
        scores = by_version[version_id]
        ratings = [s.value for s in scores if s.kind == ScoreKind.RATING]
        thumbs = [s.value for s in scores if s.kind == ScoreKind.THUMBS]
        return (
            sum(ratings) / len(ratings) if ratings else None,
            sum(thumbs) / len(thumbs) if thumbs else None,
            len(scores),
        )

    rows = scores_by_preset_version(filters_for(actors.owner))

    assert [(row["label"], row["rating_mean"], row["up_share"], row["scores"]) for row in rows] == [
        ("Triage v2", *expected(v2.pk)),  # 3 scores: ratings 5 and 4, one thumb up
        ("Triage v1", *expected(v1.pk)),
        ("No preset version", *expected(None)),  # G1's thumb
    ]
    assert expected(v2.pk) == (4.5, 1.0, 3) and expected(v1.pk) == (2.0, 0.0, 2)
    # Filters narrow the scores to the log's records: only the key's requests leave G1 alone.
    by_key = scores_by_preset_version(filters_for(actors.owner, key=str(gateway.shop_bot.pk)))
    assert [(row["label"], row["scores"]) for row in by_key] == [("No preset version", 1)]

    with clock(NOW):
        fragment = client_for(actors.viewer).get(
            reverse("analytics:chart", args=["scores-by-preset-version"]), {"range": "24h"}
        )
    html = fragment.content.decode()
    figure = json.loads(
        html.split('data-figure="', 1)[1].split('"', 1)[0].replace("&quot;", '"').replace("&#x27;", "'")
    )
    rating, thumbs = figure["data"]
    # Plotly draws the last category on top: the bars run from the least scored to the most.
    assert rating["x"] == [None, 2.0, 4.5] and thumbs["x"] == [1.0, 0.0, 1.0]
    assert thumbs["xaxis"] == "x2" and figure["layout"]["yaxis"]["ticktext"] == [
        "No preset version",
        "Triage v1",
        "Triage v2",
    ]
    assert '<td>Triage v2</td><td class="num">3</td>' in html.replace("\n", "")


def test_the_chart_says_so_when_nothing_of_the_period_was_scored(actors: Any, known: Known) -> None:
    with clock(NOW):
        html = client_for(actors.owner).get(
            reverse("analytics:chart", args=["scores-by-preset-version"]), {"range": "24h"}
        )
    assert b"No request of this period was scored." in html.content
