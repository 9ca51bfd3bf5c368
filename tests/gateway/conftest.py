"""Gateway fixtures: the live app (uvicorn on loopback), and team API keys on a connection to the
loopback fake upstream or to the real engine, with the official SDKs pointed at the gateway."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from cloudflare import Cloudflare
from django.conf import LazySettings
from django.db import OperationalError
from openai import AsyncOpenAI, OpenAI

from playground.providers.models import ProviderConnection
from playground.usage.api_keys import api_key_issue
from playground.usage.models import ApiKey, UsageRecord
from tests.support.actors import Actors
from tests.support.browser import LiveApp, engine_connection
from tests.support.engine import EngineProcess

KIMI = "@cf/moonshotai/kimi-k2.5"


@dataclass(frozen=True)
class IssuedKey:
    key: ApiKey
    secret: str

    @property
    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.secret}"}


def issue(
    actors: Actors, connection: ProviderConnection, *, name: str = "billing-agent", **limits: Any
) -> IssuedKey:
    key, secret = api_key_issue(
        team_id=connection.team_id,
        name=name,
        connection_id=connection.pk,
        created_by_id=actors.owner.pk,
        **limits,
    )
    return IssuedKey(key, secret)


@pytest.fixture
def gateway(live_app: LiveApp) -> LiveApp:
    """The live app: gateway tests need a real server (the SDKs, streams, disconnects)."""
    return live_app


@pytest.fixture
def gateway_key(transactional_db: None, actors: Actors, workers_connection: ProviderConnection) -> IssuedKey:
    return issue(actors, workers_connection)


@pytest.fixture
def oa(gateway: LiveApp, gateway_key: IssuedKey) -> Iterator[OpenAI]:
    with OpenAI(base_url=gateway.url + "/v1", api_key=gateway_key.secret, max_retries=0) as client:
        yield client


@pytest.fixture
def aoa(gateway: LiveApp, gateway_key: IssuedKey) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=gateway.url + "/v1", api_key=gateway_key.secret, max_retries=0)


@pytest.fixture
def cf(gateway: LiveApp, gateway_key: IssuedKey) -> Iterator[Cloudflare]:
    with Cloudflare(
        base_url=gateway.url + "/client/v4", api_token=gateway_key.secret, max_retries=0
    ) as client:
        yield client


@pytest.fixture
def engine_key(
    transactional_db: None, actors: Actors, settings: LazySettings, running_engine: EngineProcess
) -> IssuedKey:
    return issue(actors, engine_connection(actors, settings, running_engine), name="engine-agent")


def records_written(count: int, *, timeout: float = 10.0) -> list[UsageRecord]:
    """The usage records, once `count` exist. A stream's record is written after its last byte
    went out (an SDK stops reading at [DONE]), and a whole answer's with the records ending
    with it, so a test may ask before the gateway wrote it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            records = list(UsageRecord.objects.order_by("id"))
        except OperationalError:
            records = []
        if len(records) >= count or time.monotonic() > deadline:
            return records
        time.sleep(0.02)
