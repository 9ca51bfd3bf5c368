""" "View code" round-trips: the generated code, run for real against the loopback upstream,
sends what the playground itself sends for the same turn (path, headers, body).

Each test builds the next request's code while the message is still a draft, then sends the
same message through the chat's own turn (`chat_turn_start`), and runs the code: the two
requests that reach the fake upstream are compared field by field.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from asgiref.sync import async_to_sync

from playground.catalog.seed import KIMI_K26
from playground.chat.models import Conversation
from playground.chat.presenters.request_code import next_request_code, past_request_code
from playground.chat.services.conversations import conversation_create
from playground.chat.services.turns import ChatTurn, chat_turn_start
from playground.providers.code_samples import Snippet, TargetKind
from playground.providers.models import ProviderConnection
from playground.usage.models import UsageRecord
from tests.fakes.upstream import FakeUpstream, RecordedRequest
from tests.support.actors import Actors
from tests.support.connections import WORKERS_TOKEN

pytestmark = pytest.mark.django_db

OPENAI_TOKEN = "sk-test-gateway"  # tests/conftest.py's openai_connection
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
# What each snippet's request is compared on: the headers the code is responsible for.
COMPARED_HEADERS = ("authorization", "x-session-affinity", "content-type")
DRAFT = 'What is "2 + 2"? It\'s a $HOME `test` \\n of quoting.'


def configured(conversation: Conversation) -> Conversation:
    """Tools, a tool choice, a JSON response format and sampling parameters: all go in the body."""
    conversation.tools = [{**WEATHER, "mocks": [{"name": "sunny", "result": "{}"}]}]  # mocks are never sent
    conversation.tool_choice = "auto"
    conversation.parallel_tool_calls = False
    conversation.response_format = {"type": "json_object"}
    conversation.parameters = {"temperature": 0.3, "top_p": 0.9, "max_tokens": 120, "seed": 7}
    conversation.save()
    return conversation


@pytest.fixture
def openai_chat(actors: Actors, openai_connection: ProviderConnection) -> Conversation:
    conversation = conversation_create(
        user=actors.owner, connection_id=openai_connection.pk, model_id=KIMI_K26, system_prompt="Be brief."
    )
    return configured(conversation)


@pytest.fixture
def workers_chat(actors: Actors, workers_connection: ProviderConnection) -> Conversation:
    return configured(
        conversation_create(
            user=actors.owner,
            connection_id=workers_connection.pk,
            model_id=KIMI_K26,
            system_prompt="Be brief.",
        )
    )


def send(actors: Actors, conversation: Conversation, text: str) -> ChatTurn:
    turn = chat_turn_start(user=actors.owner, conversation_id=conversation.pk, text=text)

    async def drain() -> None:
        async for _ in turn.events():
            pass

    async_to_sync(drain)()
    return turn


def snippets_for_draft(
    conversation: Conversation, *, target: TargetKind = TargetKind.DIRECT
) -> dict[str, Snippet]:
    code = next_request_code(
        conversation=conversation, text=DRAFT, attachment_ids=[], target=target, origin="http://testserver"
    )
    assert not code.problem
    return {snippet.key: snippet for snippet in code.snippets}


def run(snippet: Snippet, tmp_path: Path, **env: str) -> None:
    """Run a snippet as its user would (bash, python, node) with the secret in the environment."""
    if snippet.language == "sh":
        command = ["bash", "-e", "-c", snippet.code]
    elif snippet.language == "python":
        command = [sys.executable, "-c", snippet.code]
    else:
        node = shutil.which("node")
        if node is None:
            pytest.skip("Node.js is not installed")
        script = tmp_path / "snippet.mjs"
        script.write_text(snippet.code)
        command = [node, str(script)]
    done = subprocess.run(
        command, env={**os.environ, **env}, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def headers(request: RecordedRequest) -> dict[str, str]:
    return {name: request.headers.get(name, "") for name in COMPARED_HEADERS}


def assert_same_request(arrived: RecordedRequest, sent: RecordedRequest, *, body: Any = None) -> None:
    assert unquote(arrived.path) == unquote(sent.path)
    assert headers(arrived) == headers(sent)
    assert arrived.json == (sent.json if body is None else body)


def test_the_openai_snippet_curl_and_fetch_send_what_the_turn_sends_on_an_openai_connection(
    actors: Actors, openai_chat: Conversation, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    send(actors, openai_chat, "Hello")  # history: the next request carries this turn
    snippets = snippets_for_draft(openai_chat)
    for key in ("python-openai", "curl", "js-fetch"):
        run(snippets[key], tmp_path, OPENAI_API_KEY=OPENAI_TOKEN)
    python, curl, fetch = fake_upstream.requests[1:4]

    send(actors, openai_chat, DRAFT)
    turn = fake_upstream.requests[-1]

    assert turn.json is not None and turn.headers["x-session-affinity"] == openai_chat.affinity_key
    assert [m["role"] for m in turn.json["messages"]] == ["system", "user", "assistant", "user"]
    assert turn.json["tools"] == [WEATHER] and turn.json["response_format"] == {"type": "json_object"}
    assert (turn.json["temperature"], turn.json["top_p"], turn.json["max_tokens"], turn.json["seed"]) == (
        0.3,
        0.9,
        120,
        7,
    )
    for arrived in (python, curl, fetch):
        assert_same_request(arrived, turn)
    assert curl.headers["accept"] == fetch.headers["accept"] == turn.headers["accept"]
    assert snippets["python-cloudflare"].code == ""  # an OpenAI-compatible endpoint has no /ai/run


def test_curl_fetch_and_the_cloudflare_snippet_send_what_the_turn_sends_on_workers_ai(
    actors: Actors, workers_chat: Conversation, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    send(actors, workers_chat, "Hello")
    snippets = snippets_for_draft(workers_chat)
    for key in ("curl", "python-cloudflare", "js-fetch", "python-openai"):
        run(snippets[key], tmp_path, CLOUDFLARE_API_TOKEN=WORKERS_TOKEN)
    curl, cloudflare, fetch, python = fake_upstream.requests[1:5]

    send(actors, workers_chat, DRAFT)
    turn = fake_upstream.requests[-1]

    assert turn.path.endswith(f"/ai/run/{KIMI_K26}")
    for arrived in (curl, cloudflare, fetch):
        assert_same_request(arrived, turn)
    # The openai SDK speaks chat completions: Workers AI's OpenAI-compatible endpoint, model in the body.
    assert python.path.endswith("/ai/v1/chat/completions")
    assert headers(python) == headers(turn)
    assert turn.json is not None and python.json == {"model": KIMI_K26, **turn.json}


def test_a_past_requests_code_sends_its_recorded_body_again(
    actors: Actors, workers_chat: Conversation, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    send(actors, workers_chat, "Hello")
    turn = fake_upstream.requests[-1]
    record = UsageRecord.objects.get()

    code = past_request_code(record=record, target=TargetKind.DIRECT, origin="http://testserver")
    curl = next(snippet for snippet in code.snippets if snippet.key == "curl")
    run(curl, tmp_path, CLOUDFLARE_API_TOKEN=WORKERS_TOKEN)

    assert_same_request(fake_upstream.requests[-1], turn)


def test_the_code_never_holds_the_connections_token(workers_chat: Conversation) -> None:
    for target in TargetKind:
        for snippet in snippets_for_draft(workers_chat, target=target).values():
            assert WORKERS_TOKEN not in snippet.code
    direct = snippets_for_draft(workers_chat)
    assert '"Authorization: Bearer $CLOUDFLARE_API_TOKEN"' in direct["curl"].code
    assert 'api_token=os.environ["CLOUDFLARE_API_TOKEN"]' in direct["python-cloudflare"].code


def test_a_token_pasted_into_a_message_is_redacted_in_the_code(workers_chat: Conversation) -> None:
    code = next_request_code(
        conversation=workers_chat,
        text=f"my token is {WORKERS_TOKEN}",
        attachment_ids=[],
        target=TargetKind.DIRECT,
        origin="http://testserver",
    )
    assert all(WORKERS_TOKEN not in snippet.code for snippet in code.snippets)


def test_the_gateway_target_names_the_gateways_urls_and_a_team_key(
    workers_chat: Conversation, workers_connection: ProviderConnection
) -> None:
    snippets = snippets_for_draft(workers_chat, target=TargetKind.GATEWAY)

    account = workers_connection.account_id
    assert snippets["curl"].url == f"http://testserver/client/v4/accounts/{account}/ai/run/{KIMI_K26}"
    assert snippets["python-openai"].url == "http://testserver/v1/chat/completions"
    assert 'api_key=os.environ["PLAYGROUND_API_KEY"]' in snippets["python-openai"].code
    assert f'"x-session-affinity": "{workers_chat.affinity_key}"' in snippets["python-openai"].code


def test_with_affinity_off_no_snippet_sends_the_header(workers_chat: Conversation) -> None:
    workers_chat.use_affinity = False
    workers_chat.save()

    assert all(
        "x-session-affinity" not in snippet.code for snippet in snippets_for_draft(workers_chat).values()
    )
