"""Usage records name the preset version whose setup sent them: a conversation started from a
version (until one of its settings changes), a batch configured by one; and the request log
filters by it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.urls import reverse

from playground.batches.models import Batch
from playground.batches.services.actions import batch_confirm
from playground.batches.services.step import batch_step_run
from playground.catalog.seed import KIMI_K26
from playground.chat.compare.forms import target_value
from playground.chat.compare.runs import comparison_run_start
from playground.chat.models import Comparison, Conversation, SystemPromptChange
from playground.chat.services.conversations import conversation_composer_update, conversation_model_change
from playground.chat.services.preset_setups import conversation_from_preset
from playground.chat.services.turns import chat_turn_start
from playground.presets.models import PresetVersion
from playground.providers.models import ProviderConnection
from playground.usage.models import RequestPath, UsageRecord
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.batches import NO_QUEUE_MODEL, jsonl, prompts
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db


def _turn(actors: Actors, conversation: Conversation, text: str) -> UsageRecord:
    turn = chat_turn_start(user=actors.teammate, conversation_id=conversation.pk, text=text)

    async def drain() -> None:
        async for _ in turn.events():
            pass

    async_to_sync(drain)()
    assert turn.assistant_message is not None and turn.assistant_message.usage_record is not None
    return turn.assistant_message.usage_record


def test_a_conversation_started_from_a_version_has_its_setup_and_its_turns_name_it(
    actors: Actors, version_one: PresetVersion, fake_upstream: FakeUpstream
) -> None:
    conversation = conversation_from_preset(user=actors.owner, version_id=version_one.pk)

    record = _turn(actors, conversation, "Weather in Paris?")

    assert conversation.preset_version == version_one and conversation.system_prompt == "Answer in French."
    assert conversation.tools[0]["mocks"] == ["18 °C, clear"] and conversation.use_affinity is False
    assert record.preset_version_id == version_one.pk
    sent = fake_upstream.requests[-1].json
    assert sent["messages"][0] == {"role": "system", "content": "Answer in French."}
    assert sent["temperature"] == 0.2 and sent["max_tokens"] == 64
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert "mocks" not in json.dumps(sent["tools"])  # mocks are never sent upstream
    assert sent["response_format"] == {"type": "json_object"}


def test_changing_a_setting_detaches_the_conversation_so_its_next_turn_names_no_version(
    actors: Actors, version_one: PresetVersion, fake_upstream: FakeUpstream
) -> None:
    conversation = conversation_from_preset(user=actors.teammate, version_id=version_one.pk)
    conversation_composer_update(
        user=actors.teammate,
        conversation_id=conversation.pk,
        parameters={"temperature": 0.2, "max_tokens": 64},
        response_format="json_object",
    )
    conversation.refresh_from_db()
    assert conversation.preset_version == version_one  # saved unchanged: still that version

    conversation_composer_update(
        user=actors.teammate,
        conversation_id=conversation.pk,
        parameters={"temperature": 1.0, "max_tokens": 64},
        response_format="json_object",
    )
    conversation.refresh_from_db()

    assert conversation.preset_version is None
    assert _turn(actors, conversation, "Again?").preset_version_id is None


def test_a_new_system_prompt_is_kept_as_a_change_and_detaches_the_conversation(
    actors: Actors, version_one: PresetVersion, fake_upstream: FakeUpstream
) -> None:
    """None leaves the prompt (and the version) as they are; the same text changes nothing; a new
    text is a `SystemPromptChange` with both versions, the next turn sends it and names no version."""
    conversation = conversation_from_preset(user=actors.teammate, version_id=version_one.pk)
    settings: dict[str, Any] = {
        "parameters": {"temperature": 0.2, "max_tokens": 64},
        "response_format": "json_object",
    }
    for unchanged in (None, "Answer in French."):
        conversation_composer_update(
            user=actors.teammate, conversation_id=conversation.pk, system_prompt=unchanged, **settings
        )
    conversation.refresh_from_db()
    assert conversation.preset_version == version_one and not SystemPromptChange.objects.exists()

    conversation_composer_update(
        user=actors.teammate, conversation_id=conversation.pk, system_prompt="Answer in Dutch.", **settings
    )

    conversation.refresh_from_db()
    change = SystemPromptChange.objects.get()
    assert (change.before, change.after, change.user) == (
        "Answer in French.",
        "Answer in Dutch.",
        actors.teammate,
    )
    assert conversation.system_prompt == "Answer in Dutch." and conversation.preset_version is None
    record = _turn(actors, conversation, "Hello?")
    assert record.preset_version_id is None
    sent = [m["content"] for m in fake_upstream.requests[-1].json["messages"] if m["role"] == "system"]
    assert sent == ["Answer in Dutch."]


def test_a_batch_configured_by_a_version_runs_its_model_with_its_settings_and_its_items_name_it(
    actors: Actors, version_one: PresetVersion, fake_upstream: FakeUpstream, openai_connection: object
) -> None:
    response = client_for(actors.teammate).post(
        reverse("batches:batch-list"),
        {
            # The form's connection and model are replaced by the version's.
            "connection": getattr(openai_connection, "pk"),  # noqa: B009
            "model_id": "something-else",
            "input_kind": "jsonl",
            "text": jsonl(prompts(3)),
            "preset_version": version_one.pk,
        },
    )
    assert response.status_code == 302
    batch = Batch.objects.get()
    assert (batch.connection_id, batch.model_id) == (version_one.connection_id, version_one.model_id)
    assert batch.preset_version == version_one
    batch_confirm(user=actors.teammate, batch_id=batch.pk)
    for _ in range(10):
        batch.refresh_from_db()
        if batch_step_run(batch_id=batch.pk, token=batch.chain_token) is None:
            break

    records = UsageRecord.objects.filter(path="batch")
    assert records.count() == 3
    assert set(records.values_list("preset_version_id", flat=True)) == {version_one.pk}
    sent = fake_upstream.requests[-1].json
    assert sent["messages"][0] == {"role": "system", "content": "Answer in French."}
    assert sent["temperature"] == 0.2


def test_the_request_log_filters_by_preset_version_and_totals_only_its_requests(
    actors: Actors, version_one: PresetVersion, set_up_conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    started = conversation_from_preset(user=actors.teammate, version_id=version_one.pk)
    mine = [_turn(actors, started, f"Q{i}") for i in range(2)]
    Conversation.objects.filter(pk=set_up_conversation.pk).update(preset_version=None)
    set_up_conversation.refresh_from_db()
    other = _turn(actors, set_up_conversation, "Not from a preset")
    client = client_for(actors.viewer)
    query = {"team": actors.team.pk, "preset_version": version_one.pk}

    page = client.get(reverse("analytics:log"), query).content.decode()
    totals = client.get(reverse("analytics:log-totals"), query).content.decode()
    everything = client.get(reverse("analytics:log"), {"team": actors.team.pk}).content.decode()

    for record in mine:
        assert str(record.request_id) in page
    assert str(other.request_id) not in page and str(other.request_id) in everything
    assert 'id="filter-preset-version"' in page and "Triage v1" in page
    assert "All 2 requests of these filters" in totals


def test_the_dashboard_ranks_prompt_versions_by_cost_with_their_cached_share(
    actors: Actors, version_one: PresetVersion, fake_upstream: FakeUpstream
) -> None:
    started = conversation_from_preset(user=actors.teammate, version_id=version_one.pk)
    records = [_turn(actors, started, f"Q{i}") for i in range(3)]
    client = client_for(actors.viewer)
    url = reverse("analytics:chart", args=["cost-by-preset-version"])

    page = client.get(url, {"team": actors.team.pk}).content.decode()
    narrowed = client.get(url, {"team": str(actors.team.pk), "model": "anything"}).content.decode()

    assert "Cost and cached share by prompt version" in page
    assert "<td>Triage v1</td>" in page and '<td class="num">3</td>' in page
    prompt = sum(record.prompt_tokens for record in records)
    cached = sum(record.cached_tokens or 0 for record in records)
    known = sum(record.prompt_tokens for record in records if record.cached_tokens is not None)
    share = "not reported" if not known else f"{cached / known:.0%}"
    assert f"<td>{share}</td>" in page and f'<td class="num">{prompt}</td>' in page
    assert "Prompt versions are summed by period and path only: clear the model filter" in narrowed


def test_changing_the_model_detaches_the_conversation_too(
    actors: Actors, version_one: PresetVersion, fake_upstream: FakeUpstream
) -> None:
    conversation = conversation_from_preset(user=actors.teammate, version_id=version_one.pk)
    assert conversation.connection_id is not None

    conversation_model_change(
        user=actors.teammate,
        conversation_id=conversation.pk,
        connection_id=conversation.connection_id,
        model_id=KIMI_K26,
    )
    conversation.refresh_from_db()

    assert conversation.preset_version is None
    assert _turn(actors, conversation, "Now?").preset_version_id is None


def test_a_version_fills_a_comparison_whose_columns_records_name_it(
    actors: Actors,
    version_one: PresetVersion,
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
) -> None:
    teammate = client_for(actors.teammate)
    form = teammate.get(f"/chat/compare/?preset_version={version_one.pk}")
    assert form.status_code == 200 and b"the preset <strong>Triage v1</strong>" in form.content
    assert f'value="{target_value(workers_connection.pk, NO_QUEUE_MODEL)}" selected'.encode() in form.content

    created = teammate.post(
        "/chat/compare/new/",
        {
            "prompt": "Weather in Lyon?",
            "system_prompt": "typed, not used",
            "preset_version": str(version_one.pk),
            "t0-target": target_value(workers_connection.pk, NO_QUEUE_MODEL),
            "t1-target": target_value(workers_connection.pk, KIMI_K26),
        },
    )

    assert created.status_code == 302
    comparison = Comparison.objects.get()
    assert comparison.preset_version_id == version_one.pk and comparison.conversation_id is None
    assert comparison.system_prompt == "Answer in French."
    assert [tool["function"]["name"] for tool in comparison.tools] == ["get_weather"]
    assert comparison.response_format == {"type": "json_object"}
    assert [column.parameters for column in comparison.columns.order_by("position")] == [
        {"temperature": 0.2, "max_tokens": 64}
    ] * 2
    started = comparison_run_start(user=actors.teammate, comparison_id=comparison.pk, first=True)
    assert started is not None
    for run in started.columns:
        assert run.call is not None
        run.call.run()
    records = UsageRecord.objects.filter(path=RequestPath.COMPARE)
    assert [record.preset_version_id for record in records] == [version_one.pk] * 2


def test_another_teams_version_cannot_fill_a_comparison(
    actors: Actors, version_one: PresetVersion, workers_connection: ProviderConnection
) -> None:
    outsider = client_for(actors.outsider)
    assert outsider.get(f"/chat/compare/?preset_version={version_one.pk}").status_code == 404
    posted = outsider.post(
        "/chat/compare/new/",
        {
            "prompt": "Hi",
            "preset_version": str(version_one.pk),
            "t0-target": target_value(workers_connection.pk, KIMI_K26),
            "t1-target": target_value(workers_connection.pk, KIMI_K26),
        },
    )
    assert posted.status_code == 404 and not Comparison.objects.exists()
