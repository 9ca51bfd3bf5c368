""" "View code" with the gateway as target: the chat's next request, as code, run through the live
gateway with a team key, reaches the upstream as the chat's own request does, and is metered."""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import unquote

import pytest
from asgiref.sync import async_to_sync

from playground.catalog.seed import KIMI_K26
from playground.chat.presenters.request_code import next_request_code
from playground.chat.services.conversations import conversation_create
from playground.chat.services.turns import chat_turn_start
from playground.providers.code_samples import TargetKind
from playground.providers.models import ProviderConnection
from playground.usage.models import RequestPath
from tests.fakes.upstream import FakeUpstream
from tests.gateway.conftest import IssuedKey, records_written
from tests.support.actors import Actors
from tests.support.browser import LiveApp

DRAFT = "Which city is the capital of Norway?"


@pytest.mark.django_db(transaction=True)
def test_the_gateway_snippets_reach_the_upstream_as_the_chat_does(
    gateway: LiveApp,
    gateway_key: IssuedKey,
    actors: Actors,
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
) -> None:
    conversation = conversation_create(
        user=actors.owner, connection_id=workers_connection.pk, model_id=KIMI_K26, system_prompt="Be brief."
    )
    code = next_request_code(
        conversation=conversation,
        text=DRAFT,
        attachment_ids=[],
        target=TargetKind.GATEWAY,
        origin=gateway.url,
    )
    snippets = {snippet.key: snippet for snippet in code.snippets}
    for key in ("curl", "python-cloudflare", "python-openai"):
        snippet = snippets[key]
        command = (
            ["bash", "-e", "-c", snippet.code]
            if snippet.language == "sh"
            else [sys.executable, "-c", snippet.code]
        )
        env = {**os.environ, "PLAYGROUND_API_KEY": gateway_key.secret}
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
    curl, cloudflare, python = fake_upstream.requests
    records = records_written(3)

    turn = chat_turn_start(user=actors.owner, conversation_id=conversation.pk, text=DRAFT)

    async def drain() -> None:
        async for _ in turn.events():
            pass

    async_to_sync(drain)()
    chat = fake_upstream.requests[-1]

    for arrived in (curl, cloudflare):
        assert unquote(arrived.path) == unquote(chat.path)
        assert arrived.json == chat.json
    assert python.path.endswith("/ai/v1/chat/completions")
    assert chat.json is not None and python.json == {"model": KIMI_K26, **chat.json}
    for arrived in (curl, cloudflare, python):
        assert arrived.headers["x-session-affinity"] == chat.headers["x-session-affinity"]
        assert arrived.headers["authorization"] == chat.headers["authorization"]  # the connection's token
    assert [(r.path, r.api_key_id, r.affinity_key) for r in records] == [
        (RequestPath.GATEWAY, gateway_key.key.pk, conversation.affinity_key)
    ] * 3
