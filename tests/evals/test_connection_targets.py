"""Connection targets: an experiment runs a connection's model with its own settings (as a Compare
column) beside a preset version, through the same batches, budget and records; its system
prompt's {{variables}} take the items' values, and what it cannot send is refused before
anything is."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.urls import reverse

from playground.batches.models import BatchItem, BatchPath
from playground.evals.models import Dataset, Experiment, ExperimentTarget, TargetKind
from playground.evals.results import experiment_records, experiment_summaries, winner_line
from playground.evals.services.experiments import ConnectionTarget, experiment_create, experiment_start
from playground.presets.models import PresetVersion
from playground.providers.kinds import ConnectionKind
from playground.providers.models import ProviderConnection
from playground.usage.models import TeamBudget, UsageRecord
from playground.usage.money import money
from tests.evals.conftest import QUESTIONS, run_to_the_end
from tests.fakes.upstream import FakeUpstream, RecordedRequest, chat_completion, computed, json_reply, usage
from tests.support.actors import Actors
from tests.support.batches import QUEUE_MODEL
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db

CHECKS: list[dict[str, Any]] = [{"kind": "contains", "ignore_case": True}]
LABEL = "gpt-oss-20b @ Gateway, t=0.2, max 40 tokens"


def _gateway(
    connection: ProviderConnection, system_prompt: str = "Answer in a {{tone}} way."
) -> ConnectionTarget:
    return ConnectionTarget(
        connection_id=connection.pk,
        model_id=QUEUE_MODEL,
        parameters={"temperature": 0.2, "max_tokens": 40},
        system_prompt=system_prompt,
    )


def _answer(request: RecordedRequest) -> Any:
    """The right answer to each quiz question, as an OpenAI-compatible upstream sends it."""
    body = request.json
    assert isinstance(body, dict)
    question = body["messages"][-1]["content"]
    text = next(answer for asked, answer in QUESTIONS if asked == question)
    return json_reply(chat_completion(text, usage_body=usage(30, 2, cached=10)))


def _mixed(actors: Actors, quiz: Dataset, version: PresetVersion, gateway: ProviderConnection) -> Experiment:
    return experiment_create(
        user=actors.owner,
        dataset_id=quiz.pk,
        preset_version_ids=[version.pk],
        connection_targets=[_gateway(gateway)],
        checks=CHECKS,
    )


def _body(response: Any) -> str:
    async def read() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(read)().decode()


def test_a_preset_version_and_a_connection_target_run_side_by_side_costing_the_records_sum(
    actors: Actors,
    quiz: Dataset,
    two_versions: tuple[PresetVersion, PresetVersion],
    openai_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
) -> None:
    fake_upstream.script(*[computed(_answer) for _ in QUESTIONS])
    experiment = _mixed(actors, quiz, two_versions[1], openai_connection)
    preset, gateway = experiment.targets.select_related("batch")
    assert (preset.kind, preset.label) == (TargetKind.PRESET_VERSION, "Quiz v2")
    assert (gateway.kind, gateway.label, gateway.model_id) == (TargetKind.CONNECTION, LABEL, QUEUE_MODEL)
    assert gateway.preset_version_id is None and gateway.parameters == {"temperature": 0.2, "max_tokens": 40}
    assert experiment.name == f"Quiz v2 vs {LABEL}"
    # The pre-flight prices both targets; nothing is sent before the start.
    assert [row["label"] for row in experiment.estimate["per_target"]] == ["Quiz v2", LABEL]
    assert all(Decimal(row["cost"]) > 0 for row in experiment.estimate["per_target"])
    assert not experiment.estimate["notes"] and not fake_upstream.requests
    assert gateway.batch is not None and gateway.batch.path == BatchPath.CONCURRENT

    experiment_start(user=actors.owner, experiment_id=experiment.pk)
    for target in (preset, gateway):
        assert target.batch is not None
        run_to_the_end(target.batch)

    # Each gateway request: the target's system prompt with the item's {{tone}}, then the input,
    # with the target's parameters.
    assert len(fake_upstream.requests) == len(QUESTIONS)
    for request in fake_upstream.requests:
        body = request.json
        assert isinstance(body, dict)
        assert body["messages"][0] == {"role": "system", "content": "Answer in a terse way."}
        assert body["messages"][1]["content"] in {question for question, _ in QUESTIONS}
        assert (body["model"], body["temperature"], body["max_tokens"]) == (QUEUE_MODEL, 0.2, 40)

    records = list(experiment_records(experiment=experiment))
    assert len(records) == 6
    summaries = experiment_summaries(experiment=experiment)
    assert [(s.target.label, s.answered, s.failed, s.records) for s in summaries] == [
        ("Quiz v2", 3, 0, 3),
        (LABEL, 3, 0, 3),
    ]
    for summary in summaries:
        own = UsageRecord.objects.filter(tags__contains=f",eval-target:{summary.target.pk},")
        assert summary.cost == sum((r.total_cost for r in own), Decimal(0)) > 0
    assert summaries[1].cached_share == pytest.approx(1 / 3)
    assert summaries[1].check_means == [1.0]  # the upstream answered every question right
    assert sum(s.cost for s in summaries) == sum((r.total_cost for r in records), Decimal(0))
    for item in BatchItem.objects.filter(batch=gateway.batch):
        record = UsageRecord.objects.get(source=item.source)
        assert record.preset_version_id is None and record.connection_id == openai_connection.pk
        assert record.tags.strip(",").split(",")[1:] == [f"eval-target:{gateway.pk}", item.external_reference]
    line = winner_line(summaries)
    assert line.startswith((f"{LABEL}:", "Quiz v2:")) and "(against " in line

    client = client_for(actors.owner)
    page = client.get(reverse("evals:experiment-detail", args=[experiment.pk])).content.decode()
    shown = [Decimal(part.split('"')[0]) for part in page.split('data-cost="')[1:]]
    assert sum(shown, Decimal(0)) == sum((r.total_cost for r in records), Decimal(0))
    assert LABEL in page and "system prompt: Answer in a {{tone}} way." in page
    exported = client.get(reverse("evals:experiment-export", args=[experiment.pk, "jsonl"]))
    rows = [json.loads(line) for line in _body(exported).splitlines()]
    assert {row["target"] for row in rows} == {"Quiz v2", LABEL}
    assert sum(Decimal(row["cost_usd"]) for row in rows) == sum((r.total_cost for r in records), Decimal(0))
    csv_text = _body(client.get(reverse("evals:experiment-export", args=[experiment.pk, "csv"])))
    assert csv_text.count(LABEL) == 3


def test_a_placeholder_the_items_leave_empty_is_refused_naming_the_items(
    actors: Actors, quiz: Dataset, openai_connection: ProviderConnection
) -> None:
    target = _gateway(openai_connection, "You are {{persona}}; be {{tone}}.")
    with pytest.raises(ValidationError) as caught:
        experiment_create(user=actors.owner, dataset_id=quiz.pk, connection_targets=[target], checks=[])
    messages = caught.value.message_dict["targets"]
    assert messages[0] == f"{LABEL} cannot send 3 item(s)."
    first = quiz.items.order_by("pk").first()
    assert first is not None and messages[1].startswith(f"item {first.pk}: ") and "{{persona}}" in messages[1]
    assert not Experiment.objects.exists() and not ExperimentTarget.objects.exists()


def test_variables_a_connection_target_does_not_use_are_said_in_the_preflight(
    actors: Actors, quiz: Dataset, openai_connection: ProviderConnection
) -> None:
    bare = ConnectionTarget(connection_id=openai_connection.pk, model_id=QUEUE_MODEL)
    experiment = experiment_create(
        user=actors.owner, dataset_id=quiz.pk, connection_targets=[bare], checks=[]
    )
    [note] = experiment.estimate["notes"]
    assert note.startswith(
        "gpt-oss-20b @ Gateway: its system prompt does not use the items' variables (tone)"
    )
    # The items' plain input goes as it is: no system prompt, no parameter the form left unset.
    target = experiment.targets.get()
    item = BatchItem.objects.get(batch=target.batch, index=0)
    assert item.request == {"messages": [{"role": "user", "content": QUESTIONS[0][0]}]}
    # The note stays when the experiment starts (its pre-flight is priced again then).
    experiment_start(user=actors.owner, experiment_id=experiment.pk)
    experiment.refresh_from_db()
    assert experiment.estimate["notes"] == [note]
    client = client_for(actors.owner)
    experiment.started_at = None  # the draft's page shows the pre-flight and its notes
    Experiment.objects.filter(pk=experiment.pk).update(started_at=None)
    page = client.get(reverse("evals:experiment-detail", args=[experiment.pk])).content.decode()
    assert 'id="preflight-notes"' in page and "(tone)" in page


def test_targets_the_user_may_not_run_or_the_model_does_not_take_are_refused(
    actors: Actors,
    quiz: Dataset,
    two_versions: tuple[PresetVersion, PresetVersion],
    openai_connection: ProviderConnection,
) -> None:
    theirs = ProviderConnection.objects.create(
        team=actors.other_team, name="Theirs", kind=ConnectionKind.OPENAI_COMPATIBLE
    )
    cases = [
        (
            ConnectionTarget(connection_id=theirs.pk, model_id=QUEUE_MODEL),
            "Target 1 (@cf/openai/gpt-oss-20b): choose a connection of the dataset's team that you may run.",
        ),
        (
            ConnectionTarget(connection_id=openai_connection.pk, model_id="has space"),
            "Target 1 (has space): ",
        ),
        (
            ConnectionTarget(
                connection_id=openai_connection.pk, model_id=QUEUE_MODEL, parameters={"temperature": 7}
            ),
            "Target 1 (@cf/openai/gpt-oss-20b): temperature: ",
        ),
    ]
    for target, message in cases:
        with pytest.raises(ValidationError) as caught:
            experiment_create(user=actors.owner, dataset_id=quiz.pk, connection_targets=[target], checks=[])
        assert caught.value.message_dict["targets"][0].startswith(message), caught.value.message_dict
    with pytest.raises(ValidationError, match="Choose 1 to 4 targets"):
        experiment_create(user=actors.owner, dataset_id=quiz.pk, checks=[])
    too_many = [_gateway(openai_connection)] * 4
    with pytest.raises(ValidationError, match="Choose 1 to 4 targets"):
        experiment_create(
            user=actors.owner,
            dataset_id=quiz.pk,
            preset_version_ids=[two_versions[0].pk],
            connection_targets=too_many,
            checks=[],
        )
    # A viewer of the team runs nothing, whatever the connection.
    with pytest.raises(PermissionDenied):
        experiment_create(
            user=actors.viewer,
            dataset_id=quiz.pk,
            connection_targets=[_gateway(openai_connection)],
            checks=[],
        )
    assert not Experiment.objects.exists()


def test_two_targets_on_one_model_are_told_apart(
    actors: Actors, quiz: Dataset, openai_connection: ProviderConnection
) -> None:
    targets = [_gateway(openai_connection), _gateway(openai_connection, "Be {{tone}}. One word.")]
    experiment = experiment_create(
        user=actors.owner, dataset_id=quiz.pk, connection_targets=targets, checks=[]
    )
    assert list(experiment.targets.values_list("label", flat=True)) == [LABEL, f"{LABEL} (#2)"]


def test_a_connection_target_the_budget_cannot_cover_is_refused_before_anything_is_sent(
    actors: Actors, quiz: Dataset, openai_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    TeamBudget.objects.create(team=actors.team, monthly_limit_usd=Decimal("0.000001"))
    experiment = experiment_create(
        user=actors.owner, dataset_id=quiz.pk, connection_targets=[_gateway(openai_connection)], checks=[]
    )
    assert "Nothing was sent" in experiment.estimate["blocked"]
    with pytest.raises(ValidationError, match="could cost up to"):
        experiment_start(user=actors.owner, experiment_id=experiment.pk)
    assert not fake_upstream.requests and not UsageRecord.objects.exists()


def test_a_connection_target_must_name_its_model_and_old_targets_stay_preset_versions(
    actors: Actors, quiz: Dataset, two_versions: tuple[PresetVersion, PresetVersion]
) -> None:
    experiment = experiment_create(
        user=actors.owner, dataset_id=quiz.pk, preset_version_ids=[two_versions[0].pk], checks=[]
    )
    target = experiment.targets.get()
    assert (target.kind, target.model_id, target.connection_id) == (TargetKind.PRESET_VERSION, "", None)
    with pytest.raises(IntegrityError), transaction.atomic():
        ExperimentTarget.objects.create(
            experiment=experiment, position=1, kind=TargetKind.CONNECTION, label="x"
        )
    with pytest.raises(IntegrityError), transaction.atomic():
        ExperimentTarget.objects.create(experiment=experiment, position=1, label="x", model_id="m")


def test_the_form_offers_the_teams_runnable_connections_and_makes_a_connection_target(
    actors: Actors,
    quiz: Dataset,
    two_versions: tuple[PresetVersion, PresetVersion],
    openai_connection: ProviderConnection,
) -> None:
    theirs = ProviderConnection.objects.create(
        team=actors.other_team, name="Theirs", kind=ConnectionKind.OPENAI_COMPATIBLE
    )
    client = client_for(actors.owner)
    page = client.get(reverse("evals:dataset-detail", args=[quiz.pk])).content.decode()
    assert 'name="c0-target"' in page and 'name="c1-system_prompt"' in page
    assert f'value="{openai_connection.pk}:' in page and f'value="{theirs.pk}:' not in page

    url = reverse("evals:experiment-create", args=[quiz.pk])
    empty = client.post(url, {"checks": ""})
    assert empty.status_code == 400 and "Choose 1 to 4 targets" in empty.content.decode()
    out_of_range = client.post(
        url, {"c0-target": f"{openai_connection.pk}:{QUEUE_MODEL}", "c0-temperature": "9"}
    )
    assert out_of_range.status_code == 400 and "field-error" in out_of_range.content.decode()
    forged = client.post(url, {"c0-target": f"{theirs.pk}:{QUEUE_MODEL}"})
    assert forged.status_code == 400 and not Experiment.objects.exists()

    made = client.post(
        url,
        {
            "versions": [str(two_versions[0].pk)],
            "c0-target": f"{openai_connection.pk}:{QUEUE_MODEL}",
            "c0-temperature": "0.2",
            "c0-max_tokens": "40",
            "c0-system_prompt": "Answer in a {{tone}} way.",
            "checks": '{"kind": "contains"}',
        },
    )
    assert made.status_code == 302, made.content.decode()[:2000]
    experiment = Experiment.objects.get()
    assert list(experiment.targets.values_list("kind", "label")) == [
        (TargetKind.PRESET_VERSION, "Quiz v1"),
        (TargetKind.CONNECTION, LABEL),
    ]


def test_the_compare_page_pairs_a_preset_version_with_a_connection_target_by_label(
    actors: Actors,
    quiz: Dataset,
    two_versions: tuple[PresetVersion, PresetVersion],
    openai_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
) -> None:
    fake_upstream.script(*[computed(_answer) for _ in QUESTIONS])
    runs = [
        experiment_create(
            user=actors.owner, dataset_id=quiz.pk, preset_version_ids=[two_versions[1].pk], checks=CHECKS
        ),
        experiment_create(
            user=actors.owner,
            dataset_id=quiz.pk,
            connection_targets=[_gateway(openai_connection)],
            checks=CHECKS,
        ),
    ]
    for experiment in runs:
        experiment_start(user=actors.owner, experiment_id=experiment.pk)
        for target in experiment.targets.select_related("batch"):
            assert target.batch is not None
            run_to_the_end(target.batch)
    a, b = runs
    page = client_for(actors.owner).get(reverse("evals:compare"), {"a": a.pk, "b": b.pk}).content.decode()
    assert "A · Quiz v2" in page and f"B · {LABEL}" in page
    # B's cost on the page is its records' sum.
    cost = sum((r.total_cost for r in experiment_records(experiment=b)), Decimal(0))
    assert cost > 0 and money(cost) in page
