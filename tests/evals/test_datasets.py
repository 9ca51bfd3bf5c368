"""Datasets: uploads refuse bad lines by number and keep the good ones only when confirmed; every
edit is a new version; a version lists page by page; another team's dataset is a 404."""

from __future__ import annotations

import io
import json

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from playground.evals.models import Dataset, DatasetItem
from playground.evals.selectors import dataset_items_page, dataset_version_items
from playground.evals.services.datasets import (
    DatasetNotFound,
    dataset_create,
    dataset_item_add,
    dataset_item_remove,
    dataset_upload,
    dataset_upload_confirm,
    dataset_upload_discard,
)
from playground.evals.uploads import ItemFields
from tests.support.actors import Actors
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db


def _jsonl(*rows: object) -> io.BytesIO:
    return io.BytesIO("\n".join(row if isinstance(row, str) else json.dumps(row) for row in rows).encode())


@pytest.fixture
def dataset(actors: Actors) -> Dataset:
    return dataset_create(user=actors.owner, team_id=actors.team.pk, name="Support questions")


def test_an_upload_with_a_bad_line_keeps_nothing_until_the_user_confirms(
    actors: Actors, dataset: Dataset
) -> None:
    stream = _jsonl(
        {"input": "Where is my parcel?", "expected": "tracking"},
        {"input": "Refund?", "variables": {"tone": "warm"}, "metadata": {"lang": "en"}},
        "{not json",
        {"expected": "an item with nothing to send"},
        {"messages": [{"role": "user", "content": "Hi"}], "expected": 42},
    )
    result = dataset_upload(
        user=actors.owner, dataset_id=dataset.pk, file_name="q.jsonl", kind="jsonl", stream=stream
    )

    assert result.version is None and result.upload is not None
    assert [(e["line"], e["message"][:20]) for e in result.upload.errors] == [
        (3, "not valid JSON at co"),
        (4, "the item has neither"),
    ]
    assert result.upload.item_count == 3
    dataset.refresh_from_db()
    assert dataset.version == 0
    assert not dataset_version_items(dataset=dataset, version=1).exists()

    version = dataset_upload_confirm(user=actors.owner, upload_id=result.upload.pk)
    assert (version.number, version.item_count) == (1, 3)
    items = list(dataset_version_items(dataset=dataset, version=1))
    assert [item.line for item in items] == [1, 2, 5]
    assert items[1].variables == {"tone": "warm"} and items[1].metadata == {"lang": "en"}
    assert items[2].expected == "42" and items[2].messages == [{"role": "user", "content": "Hi"}]
    assert "2 bad line(s) left out" in version.change


def test_a_discarded_upload_leaves_the_dataset_as_it_was(actors: Actors, dataset: Dataset) -> None:
    result = dataset_upload(
        user=actors.owner,
        dataset_id=dataset.pk,
        file_name="q.jsonl",
        kind="jsonl",
        stream=_jsonl({"input": "a"}, "[]"),
    )
    assert result.upload is not None
    dataset_upload_discard(user=actors.owner, upload_id=result.upload.pk)
    assert not DatasetItem.objects.filter(dataset=dataset).exists()


def test_a_clean_upload_is_the_next_version_at_once_and_a_file_of_bad_lines_is_refused(
    actors: Actors, dataset: Dataset
) -> None:
    result = dataset_upload(
        user=actors.owner,
        dataset_id=dataset.pk,
        file_name="q.jsonl",
        kind="jsonl",
        stream=_jsonl({"input": "a"}),
    )
    assert result.version is not None and result.version.number == 1
    with pytest.raises(ValidationError, match="no item that can be kept"):
        dataset_upload(
            user=actors.owner,
            dataset_id=dataset.pk,
            file_name="bad.jsonl",
            kind="jsonl",
            stream=_jsonl("nope"),
        )
    assert DatasetItem.objects.filter(dataset=dataset).count() == 1


def test_a_csv_upload_reads_other_columns_as_variables(actors: Actors, dataset: Dataset) -> None:
    text = 'input,expected,customer,metadata\nWhere is it?,soon,Ada,"{""vip"": true}"\n,missing input,Bob,\n'
    result = dataset_upload(
        user=actors.owner,
        dataset_id=dataset.pk,
        file_name="q.csv",
        kind="csv",
        stream=io.BytesIO(text.encode()),
    )
    assert result.upload is not None
    assert [e["line"] for e in result.upload.errors] == [3]
    dataset_upload_confirm(user=actors.owner, upload_id=result.upload.pk)
    (item,) = dataset_version_items(dataset=dataset, version=1)
    assert (item.input, item.expected, item.variables, item.metadata) == (
        "Where is it?",
        "soon",
        {"customer": "Ada"},
        {"vip": True},
    )


def test_each_edit_is_a_version_and_an_old_version_still_reads_as_it_was(
    actors: Actors, dataset: Dataset
) -> None:
    first = dataset_item_add(user=actors.owner, dataset_id=dataset.pk, fields=ItemFields(input="one"))
    dataset_item_add(user=actors.owner, dataset_id=dataset.pk, fields=ItemFields(input="two", expected="2"))
    item = DatasetItem.objects.get(dataset=dataset, input="one")
    third = dataset_item_remove(user=actors.owner, dataset_id=dataset.pk, item_id=item.pk)

    assert (first.number, third.number, third.item_count) == (1, 3, 1)
    assert [i.input for i in dataset_version_items(dataset=dataset, version=2)] == ["one", "two"]
    assert [i.input for i in dataset_version_items(dataset=dataset, version=3)] == ["two"]
    with pytest.raises(DatasetNotFound):  # already removed
        dataset_item_remove(user=actors.owner, dataset_id=dataset.pk, item_id=item.pk)


def test_ten_thousand_items_are_stored_and_listed_a_page_at_a_time(
    actors: Actors, dataset: Dataset, django_assert_max_num_queries: object
) -> None:
    stream = _jsonl(*({"input": f"Question {i}", "expected": str(i)} for i in range(10_000)))
    dataset_upload(
        user=actors.owner, dataset_id=dataset.pk, file_name="big.jsonl", kind="jsonl", stream=stream
    )
    with django_assert_max_num_queries(2):  # type: ignore[operator]
        page = dataset_items_page(dataset=dataset, version=1, page=3)
        rows = list(page.object_list)
    assert page.paginator.count == 10_000
    assert [row.input for row in rows[:2]] == ["Question 100", "Question 101"] and len(rows) == 50


def test_viewers_cannot_edit_and_another_teams_dataset_is_a_404(actors: Actors, dataset: Dataset) -> None:
    with pytest.raises(PermissionDenied):
        dataset_item_add(user=actors.viewer, dataset_id=dataset.pk, fields=ItemFields(input="x"))
    with pytest.raises(DatasetNotFound):
        dataset_item_add(user=actors.outsider, dataset_id=dataset.pk, fields=ItemFields(input="x"))
    outsider = client_for(actors.outsider)
    assert outsider.get(reverse("evals:dataset-detail", args=[dataset.pk])).status_code == 404
    upload = reverse("evals:dataset-upload", args=[dataset.pk])
    file = io.BytesIO(b'{"input": "x"}\n')
    file.name = "x.jsonl"
    assert outsider.post(upload, {"file": file}).status_code == 404
    assert not DatasetItem.objects.filter(dataset=dataset).exists()


def test_the_pages_upload_then_confirm_the_good_lines(actors: Actors, dataset: Dataset) -> None:
    client = client_for(actors.owner)
    file = io.BytesIO(b'{"input": "a"}\n{"input": 3}\n{"input": "c"}\n')
    file.name = "items.jsonl"
    response = client.post(reverse("evals:dataset-upload", args=[dataset.pk]), {"file": file})
    assert response.status_code == 302
    page = client.get(reverse("evals:dataset-detail", args=[dataset.pk])).content.decode()
    assert "Line 2: `input` must be text." in page
    assert "Keep 2 good items" in page
    upload = dataset.uploads.get()
    client.post(reverse("evals:dataset-upload-action", args=[dataset.pk, upload.pk, "confirm"]))
    page = client.get(reverse("evals:dataset-detail", args=[dataset.pk])).content.decode()
    assert "showing v1 of v1, 2 items" in page
    home = client.get(reverse("evals:home")).content.decode()
    assert "Support questions" in home
