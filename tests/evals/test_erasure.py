"""Erasing an end user reaches what evaluations copied: a dataset item made from one of the end
user's requests loses its text (keeping its place in the dataset's versions), the id is replaced
by its tombstone in other items and in the checks' reasons, and another team's items and another
end user's copies are left as they were."""

from __future__ import annotations

from typing import Any

import pytest

from playground.accounts.models import Team
from playground.batches.models import Batch, BatchItem
from playground.catalog.seed import ENGINE_MODEL_ID
from playground.evals.erasure import ERASED_NOTE
from playground.evals.models import CheckResult, DatasetItem, Experiment, ExperimentTarget
from playground.evals.services.datasets import dataset_create, dataset_item_add
from playground.evals.services.from_records import dataset_add_records
from playground.evals.uploads import ItemFields
from playground.teams.services.erasure import end_user_erase_by_owner
from playground.usage.erasure import end_user_needle
from playground.usage.models import UsageRecord, UsageStatus
from tests.support.actors import Actors

pytestmark = pytest.mark.django_db

ANA = "cust-4711-ana"  # the end user erased
BO = "cust-9000-bo"  # another end user of the same team


def _request(team: Team, end_user: str, text: str) -> UsageRecord:
    body: dict[str, Any] = {"model": "@cf/meta/llama", "messages": [{"role": "user", "content": text}]}
    return UsageRecord.objects.create(
        team=team, model_id="@cf/meta/llama", status=UsageStatus.OK, end_user=end_user, request_body=body
    )


def test_copies_of_the_end_users_requests_lose_their_text_and_mentions_become_the_tombstone(
    actors: Actors,
) -> None:
    team = actors.team
    ana, bo = _request(team, ANA, "My order 5521 is late"), _request(team, BO, "Where is my parcel?")
    dataset = dataset_create(user=actors.owner, team_id=team.pk, name="Support")
    dataset_add_records(
        user=actors.owner,
        team_id=team.pk,
        request_ids=[str(ana.request_id), str(bo.request_id)],
        dataset_id=dataset.pk,
    )
    dataset_item_add(
        user=actors.owner,
        dataset_id=dataset.pk,
        fields=ItemFields(input=f"Refund {ANA}", expected=f"Yes, {ANA}"),
    )
    bravo = dataset_create(user=actors.outsider, team_id=actors.other_team.pk, name="Bravo")
    dataset_item_add(user=actors.outsider, dataset_id=bravo.pk, fields=ItemFields(input=f"Refund {ANA}"))
    experiment = Experiment.objects.create(team=team, name="v1", dataset=dataset, dataset_version=2)
    batch = Batch.objects.create(team=team, model_id=ENGINE_MODEL_ID, input_kind="jsonl", path="concurrent")
    target = ExperimentTarget.objects.create(experiment=experiment, position=0, label="v1", batch=batch)
    item = BatchItem.objects.create(batch=batch, index=0, line=1, request={})
    CheckResult.objects.create(target=target, batch_item=item, index=0, position=0, reason=f"Said {ANA}")
    copy_of_ana, copy_of_bo, by_hand = DatasetItem.objects.filter(dataset=dataset).order_by("id")

    counts = end_user_erase_by_owner(actor=actors.membership(actors.owner), end_user=ANA)

    tombstone = end_user_needle(team_id=team.pk, end_user=ANA).tombstone
    copy_of_ana.refresh_from_db()
    assert (copy_of_ana.input, copy_of_ana.messages, copy_of_ana.variables, copy_of_ana.expected) == (
        "",
        None,
        {},
        "",
    )
    assert copy_of_ana.metadata == {"request_id": str(ana.request_id), "erased": ERASED_NOTE}
    assert copy_of_ana.added_in == 1  # still in the versions that had it: experiments line up
    copy_of_bo.refresh_from_db()
    assert copy_of_bo.messages == [{"role": "user", "content": "Where is my parcel?"}]
    by_hand.refresh_from_db()
    assert (by_hand.input, by_hand.expected) == (f"Refund {tombstone}", f"Yes, {tombstone}")
    assert CheckResult.objects.get().reason == f"Said {tombstone}"
    assert DatasetItem.objects.get(dataset=bravo).input == f"Refund {ANA}"  # another team's
    assert (counts["dataset_items"], counts["check_reasons"]) == (2, 1)
    again = end_user_erase_by_owner(actor=actors.membership(actors.owner), end_user=ANA)
    assert (again["dataset_items"], again["check_reasons"]) == (0, 0)
