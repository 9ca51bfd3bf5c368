"""Add to dataset from the request log: each record's body goes in as stored (a redacted one with
its placeholders, and says so), a record with no text is refused with its reason, every add is a
new version, and another team's records and datasets are refused."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse
from django.utils import timezone

from playground.accounts.models import StoreMode, Team
from playground.evals.models import Dataset, DatasetItem
from playground.evals.selectors import dataset_version_items
from playground.evals.services.datasets import DatasetNotFound, dataset_create
from playground.evals.services.from_records import MAX_RECORDS, dataset_add_records, record_lines
from playground.usage.models import BodyRemoved, UsageRecord, UsageStatus
from tests.support.actors import Actors
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db

EMAIL = "<email:3f2a9c>"


def _record(team: Team, body: dict[str, Any] | None, **fields: Any) -> UsageRecord:
    return UsageRecord.objects.create(
        team=team, model_id="@cf/meta/llama", status=UsageStatus.OK, request_body=body, **fields
    )


def _chat(*messages: tuple[str, Any]) -> dict[str, Any]:
    return {"model": "@cf/meta/llama", "messages": [{"role": r, "content": c} for r, c in messages]}


@pytest.fixture
def records(actors: Actors) -> dict[str, UsageRecord]:
    team = actors.team
    return {
        "full": _record(
            team,
            _chat(("system", "Be brief."), ("user", "Where is my parcel?")),
            variables={"tone": "warm"},
        ),
        "parts": _record(
            team, _chat(("user", [{"type": "text", "text": "Line one"}, {"type": "text", "text": "two"}]))
        ),
        "redacted": _record(
            team,
            _chat(("user", f"Mail me at {EMAIL} please")),
            store_mode=StoreMode.REDACTED,
            redactions={"email": 1},
        ),
        "metadata": _record(team, None, store_mode=StoreMode.METADATA),
        "removed": _record(team, None, body_removed_by=BodyRemoved.RETENTION, body_removed_at=timezone.now()),
        "image": _record(
            team,
            _chat(
                ("user", [{"type": "text", "text": "What is it?"}, {"type": "image_url", "image_url": {}}])
            ),
        ),
        "foreign": _record(actors.other_team, _chat(("user", "Bravo's secret question"))),
    }


def _ids(records: dict[str, UsageRecord], *names: str) -> list[str]:
    return [str(records[name].request_id) for name in names]


def test_bodies_go_in_as_stored_and_records_without_text_are_refused_by_line(
    actors: Actors, records: dict[str, UsageRecord]
) -> None:
    dataset = dataset_create(user=actors.owner, team_id=actors.team.pk, name="From the log")
    names = ("full", "parts", "redacted", "metadata", "removed", "image", "foreign")
    added = dataset_add_records(
        user=actors.teammate, team_id=actors.team.pk, request_ids=_ids(records, *names), dataset_id=dataset.pk
    )

    assert added.count == 3
    assert added.version.number == 1 and added.version.item_count == 3
    assert (
        added.version.change == "Added 3 request(s) from the log, 1 redacted (placeholders kept), 4 refused"
    )
    refused = {line.request_id: line.refused for line in added.refused}
    assert refused == {
        str(
            records["metadata"].request_id
        ): "The record keeps metadata only (no prompt text): nothing to add.",
        str(records["removed"].request_id): (
            f"Its text was removed on {timezone.now().date()} by the team's retention: nothing to add."
        ),
        str(records["image"].request_id): "Message 1 holds an image or a tool call: items carry text only.",
        str(records["foreign"].request_id): "No request with this id in the team's log.",
    }
    items = list(dataset_version_items(dataset=dataset, version=1))
    assert [item.messages for item in items] == [
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where is my parcel?"}],
        [{"role": "user", "content": "Line one\ntwo"}],
        [{"role": "user", "content": f"Mail me at {EMAIL} please"}],
    ]
    assert items[0].variables == {"tone": "warm"} and items[0].expected == ""
    assert items[0].metadata == {"request_id": str(records["full"].request_id), "model": "@cf/meta/llama"}
    assert items[2].metadata["redacted"] == {"email": 1}


def test_a_second_add_is_a_new_version_and_a_new_dataset_can_be_named(
    actors: Actors, records: dict[str, UsageRecord]
) -> None:
    first = dataset_add_records(
        user=actors.owner, team_id=actors.team.pk, request_ids=_ids(records, "full"), new_name="Log picks"
    )
    second = dataset_add_records(
        user=actors.owner,
        team_id=actors.team.pk,
        request_ids=_ids(records, "parts", "parts"),  # a repeated id counts once
        dataset_id=first.dataset.pk,
    )
    assert (first.version.number, second.version.number) == (1, 2)
    assert second.version.item_count == 2
    assert dataset_version_items(dataset=first.dataset, version=1).count() == 1


def test_nothing_is_written_when_no_selected_request_can_be_an_item(
    actors: Actors, records: dict[str, UsageRecord]
) -> None:
    with pytest.raises(ValidationError, match="None of the selected requests can be added"):
        dataset_add_records(
            user=actors.owner,
            team_id=actors.team.pk,
            request_ids=[*_ids(records, "metadata", "foreign"), "not-a-uuid"],
            new_name="Empty",
        )
    assert not Dataset.objects.filter(name="Empty").exists()
    assert not DatasetItem.objects.exists()


def test_another_teams_dataset_and_viewers_are_refused(
    actors: Actors, records: dict[str, UsageRecord]
) -> None:
    bravo = dataset_create(user=actors.outsider, team_id=actors.other_team.pk, name="Bravo's")
    with pytest.raises(DatasetNotFound):
        dataset_add_records(
            user=actors.owner, team_id=actors.team.pk, request_ids=_ids(records, "full"), dataset_id=bravo.pk
        )
    with pytest.raises(PermissionDenied):
        dataset_add_records(
            user=actors.viewer, team_id=actors.team.pk, request_ids=_ids(records, "full"), new_name="Viewer's"
        )
    assert not DatasetItem.objects.exists()


def test_too_many_ids_at_once_are_refused(actors: Actors) -> None:
    with pytest.raises(ValidationError, match=f"at most {MAX_RECORDS}"):
        record_lines(team_id=actors.team.pk, request_ids=[str(uuid.uuid4()) for _ in range(MAX_RECORDS + 1)])


def test_the_page_previews_each_line_then_adds_and_lists_what_was_refused(
    actors: Actors, records: dict[str, UsageRecord]
) -> None:
    client = client_for(actors.teammate)
    url = reverse("evals:from-log")
    ids = _ids(records, "full", "redacted", "metadata", "foreign")
    preview = client.get(url, {"team": str(actors.team.pk), "record": ids})
    body = preview.content.decode()
    assert preview.status_code == 200
    assert "goes in with its placeholders" in body and EMAIL.replace("<", "&lt;").replace(">", "&gt;") in body
    assert "keeps metadata only" in body and "Bravo&#x27;s secret question" not in body

    missing_name = client.post(url, {"team": actors.team.pk, "record": ids, "dataset": "new", "name": ""})
    assert missing_name.status_code == 400 and "Name the new dataset." in missing_name.content.decode()

    done = client.post(url, {"team": actors.team.pk, "record": ids, "dataset": "new", "name": "Picks"})
    text = done.content.decode()
    assert done.status_code == 200
    assert "Added 2 requests to" in text and "Picks v1" in text
    assert "keeps metadata only" in text and "No request with this id" in text
    assert Dataset.objects.get(name="Picks").versions.get().item_count == 2


def test_another_teams_log_is_a_404(actors: Actors, records: dict[str, UsageRecord]) -> None:
    client = client_for(actors.owner)
    url = reverse("evals:from-log")
    assert (
        client.get(url, {"team": str(actors.other_team.pk), "record": _ids(records, "foreign")}).status_code
        == 404
    )
    assert client.get(url, {"team": "x"}).status_code == 404
    assert client.get(url, {"team": "9" * 30}).status_code == 404  # no bigint overflow
    posted = client.post(
        url, {"team": actors.other_team.pk, "record": _ids(records, "foreign"), "dataset": "new", "name": "x"}
    )
    assert posted.status_code == 404
