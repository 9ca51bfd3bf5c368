"""No secret reaches the logs beyond its last four characters, on any chat, connection or error path.

Canary secrets (a provider token, the engine token, a password) are configured, everything
logs at DEBUG (httpx, httpcore, Django and django-axes included), the paths run for real
against the loopback fake upstream, and every five-character run of every canary is
looked for in the formatted records, tracebacks included.
"""

from __future__ import annotations

import logging
import secrets
import string
from collections.abc import Iterator

import pytest
from asgiref.sync import sync_to_async
from django.conf import LazySettings
from django.test import Client

from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26
from playground.chat.services.conversations import conversation_create
from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.services import connection_engine_ensure, connection_save
from tests.fakes.upstream import FakeUpstream, error, native_frame, sse, v4_error
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.connections import ACCOUNT_ID
from tests.support.sockets import Socket

pytestmark = pytest.mark.django_db(transaction=True)

LOGGERS = ["", "django", "httpx", "httpcore", "axes", "playground", "asyncio", "channels", "daphne"]


def canary() -> str:
    """Random letters: a five-letter run of one will not turn up in logs by chance."""
    return "".join(secrets.choice(string.ascii_letters) for _ in range(32))


@pytest.fixture
def everything_logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    yield caplog


def assert_no_canary(caplog: pytest.LogCaptureFixture, canaries: list[str]) -> None:
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    text = "\n".join(formatter.format(record) for record in caplog.records)
    assert len(caplog.records) > 10, "nothing was logged: the test would prove nothing"
    for secret in canaries:
        leaked = [secret[i : i + 5] for i in range(len(secret) - 4) if secret[i : i + 5] in text]
        assert not leaked, f"the logs contain {leaked[0]!r}, part of a secret"


async def test_chat_and_upstream_error_paths_log_no_secret(
    open_socket: object,
    actors: Actors,
    fake_upstream: FakeUpstream,
    settings: LazySettings,
    everything_logged: pytest.LogCaptureFixture,
    catalogue: None,
) -> None:
    provider_token, engine_token = canary(), canary()
    settings.UPSTREAM_MAX_RETRY_AFTER = 0.01
    settings.ENGINE_URL = fake_upstream.url
    settings.ENGINE_API_TOKEN = engine_token
    fake_upstream.unscripted = ("/models", "/engine/v1/tokenize")  # the scripted replies are the turns'
    workers, engine = await sync_to_async(_connections)(actors, fake_upstream, provider_token)
    chat = await sync_to_async(conversation_create)(
        user=actors.owner, connection_id=workers.pk, model_id=KIMI_K26
    )
    local = await sync_to_async(conversation_create)(
        user=actors.owner, connection_id=engine.pk, model_id=ENGINE_MODEL_ID
    )
    fake_upstream.script(
        sse([native_frame("Fine.")]),  # an answer
        error(503),  # a retry, then an answer
        sse([native_frame("Again.")]),
        error(401, v4_error(10000, f"Authentication error: bad token {provider_token}")),  # echoes the token
        error(403, v4_error(10000, f"Forbidden for Bearer {engine_token}")),  # the engine's token, echoed
        sse([native_frame("cut")], done=False, abort=True),  # a dropped connection
    )
    for conversation, text in [
        (chat, "One"),
        (chat, "Two"),
        (chat, "Three"),
        (local, "Four"),
        (chat, "Five"),
    ]:
        socket: Socket = open_socket("owner", conversation.pk)  # type: ignore[operator]
        await socket.exchange(text)
    settings.ENGINE_URL = "http://127.0.0.1:9"  # nothing listens: a refused connection
    settings.UPSTREAM_MAX_RETRIES = 0
    await open_socket("owner", local.pk).exchange("Six")  # type: ignore[operator]

    # With the engine's model list, asked at creation, and before "Four" its window and its count.
    assert len(fake_upstream.requests) == 9
    assert_no_canary(everything_logged, [provider_token, engine_token])


def _connections(
    actors: Actors, fake_upstream: FakeUpstream, token: str
) -> tuple[ProviderConnection, ProviderConnection]:
    workers = ProviderConnection(
        team=actors.team,
        name="Workers AI (canary)",
        kind=ConnectionKind.WORKERS_AI,
        base_url=fake_upstream.workers_base_url,
        account_id=ACCOUNT_ID,
    )
    return connection_save(connection=workers, token=token), connection_engine_ensure(team=actors.team)


def test_connection_form_and_login_paths_log_no_secret(
    actors: Actors, settings: LazySettings, everything_logged: pytest.LogCaptureFixture
) -> None:
    token, password = canary(), canary()
    actors.owner.set_password(password)
    actors.owner.save()
    owner = client_for(actors.owner)
    add = f"/teams/{actors.team.pk}/connections/new/"
    form = {"name": "Gateway", "kind": ConnectionKind.OPENAI_COMPATIBLE, "token": token}

    owner.post(add, {**form, "base_url": "http://10.0.0.5/v1"})  # refused
    owner.post(add, {**form, "base_url": "http://127.0.0.1:9/v1"})
    for wrong in range(11):  # failures, then a lockout
        Client().post("/login/", {"username": "owner", "password": password[: -wrong - 1]})
    Client().post("/admin/login/", {"username": "owner", "password": password})

    assert ProviderConnection.objects.filter(name="Gateway").count() == 1
    assert_no_canary(everything_logged, [token, password])
