"""`/healthz`, `/readyz` and `/metrics` through the real ASGI entry point (`playground.asgi`): no
login, no host check, the token or the loopback rule, and readiness that names what is down."""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from django.conf import LazySettings

from playground.providers.models import ConnectionKind, ProviderConnection
from tests.support.actors import Actors

pytestmark = pytest.mark.django_db(transaction=True)  # the probes read the database from their own thread

LOOPBACK = ("127.0.0.1", 40000)
ELSEWHERE = ("10.0.0.5", 40000)


def client_from(address: tuple[str, int]) -> httpx.AsyncClient:
    from playground.asgi import application

    transport = httpx.ASGITransport(app=application, client=address)
    # A host no ALLOWED_HOSTS names: Prometheus and orchestrators call by address.
    return httpx.AsyncClient(transport=transport, base_url="http://10.1.2.3:8000")


@pytest.fixture
async def local() -> AsyncIterator[httpx.AsyncClient]:
    async with client_from(LOOPBACK) as client:
        yield client


@pytest.fixture
async def remote() -> AsyncIterator[httpx.AsyncClient]:
    async with client_from(ELSEWHERE) as client:
        yield client


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # nothing listens once the socket is closed


async def test_healthz_answers_anyone_without_login_or_session(remote: httpx.AsyncClient) -> None:
    response = await remote.get("/healthz")

    assert (response.status_code, response.text) == (200, "ok\n")
    assert "set-cookie" not in response.headers
    assert "content-security-policy" not in response.headers  # Django's page middleware never ran


async def test_readyz_is_ready_with_the_embedded_dependencies_within_50_ms(
    remote: httpx.AsyncClient, settings: LazySettings
) -> None:
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        response = await remote.get("/readyz")
        timings.append(time.perf_counter() - started)

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    expected = {"database": True, "broker": True} | ({"redis": True} if settings.REDIS_URL else {})
    assert {name: check["ok"] for name, check in body["checks"].items()} == expected
    assert min(timings) < 0.050


async def test_readyz_is_unavailable_with_the_reason_when_redis_does_not_answer(
    remote: httpx.AsyncClient, settings: LazySettings
) -> None:
    settings.REDIS_URL = f"redis://127.0.0.1:{closed_port()}/0"

    response = await remote.get("/readyz")

    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["redis"]["ok"] is False
    assert "ConnectionError" in body["checks"]["redis"]["reason"]
    assert body["checks"]["database"]["ok"] is True


async def test_readyz_pings_a_redis_broker_once_for_both_names(
    remote: httpx.AsyncClient, settings: LazySettings
) -> None:
    settings.REDIS_URL = settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{closed_port()}/0"

    checks = (await remote.get("/readyz")).json()["checks"]

    assert checks["broker"]["ok"] is False
    assert checks["broker"]["reason"] == checks["redis"]["reason"]


async def test_readyz_asks_the_engine_only_once_a_team_has_an_engine_connection(
    remote: httpx.AsyncClient, actors: Actors
) -> None:
    assert "engine" not in (await remote.get("/readyz")).json()["checks"]

    await ProviderConnection.objects.acreate(team=actors.team, name="Engine", kind=ConnectionKind.ENGINE)
    response = await remote.get("/readyz")

    assert response.status_code == 503  # the test settings point ENGINE_URL at a closed port
    engine = response.json()["checks"]["engine"]
    assert engine["ok"] is False
    assert engine["reason"]


async def test_metrics_answer_loopback_only_when_no_token_is_set(
    local: httpx.AsyncClient, remote: httpx.AsyncClient
) -> None:
    assert (await local.get("/metrics")).status_code == 200
    refused = await remote.get("/metrics")
    assert refused.status_code == 403
    assert "METRICS_TOKEN" in refused.text
    # A reverse proxy on the same host connects from loopback, and says whom for.
    assert (await local.get("/metrics", headers={"x-forwarded-for": "203.0.113.9"})).status_code == 403
    assert (await remote.get("/readyz")).status_code == 200  # orchestrators probe from elsewhere


@pytest.mark.parametrize("path", ["/readyz", "/metrics"])
async def test_with_a_token_set_readyz_and_metrics_refuse_requests_without_it(
    path: str, local: httpx.AsyncClient, remote: httpx.AsyncClient, settings: LazySettings
) -> None:
    settings.METRICS_TOKEN = "scrape-secret"

    missing = await local.get(path)
    wrong = await remote.get(path, headers={"authorization": "Bearer not-it"})
    right = await remote.get(path, headers={"authorization": "Bearer scrape-secret"})

    assert (missing.status_code, wrong.status_code, right.status_code) == (401, 401, 200)
    assert missing.headers["www-authenticate"] == "Bearer"
    assert (await remote.get("/healthz")).status_code == 200  # liveness stays open


async def test_probes_answer_get_only(local: httpx.AsyncClient) -> None:
    response = await local.post("/metrics")

    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"
