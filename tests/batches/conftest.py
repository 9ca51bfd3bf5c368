"""Batch fixtures: a team's connections to the loopback fake upstream, and drafts built from JSONL."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from playground.accounts.models import Membership, Role
from playground.batches.inputs import utf8_lines
from playground.batches.models import Batch
from playground.batches.services import BatchInput, batch_confirm, batch_draft_create
from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import catalog_seed
from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.services import connection_save
from tests.conftest import Actors
from tests.fakes.fixtures import fake_upstream  # noqa: F401
from tests.fakes.upstream import FakeUpstream

WORKERS_TOKEN = "cf-batch-token-abcdef"
QUEUE_MODEL = "@cf/openai/gpt-oss-20b"  # the catalogue says it takes the batch queue
NO_QUEUE_MODEL = "@cf/qwen/qwen3-30b-a3b-fp8"  # ... and this one does not


@pytest.fixture
def catalogue(db: None) -> None:
    catalog_seed(CatalogModel, PriceCard)


@pytest.fixture
def viewer(actors: Actors) -> User:
    user = User.objects.create_user("viewer", password="password-viewer")
    Membership.objects.create(team=actors.team, user=user, role=Role.VIEWER)
    return user


@pytest.fixture
def workers_connection(actors: Actors, fake_upstream: FakeUpstream, catalogue: None) -> ProviderConnection:  # noqa: F811
    connection = ProviderConnection(
        team=actors.team,
        name="Workers AI (fake)",
        kind=ConnectionKind.WORKERS_AI,
        base_url=fake_upstream.workers_base_url,
        account_id="0123456789abcdef0123456789abcdef",
    )
    return connection_save(connection=connection, token=WORKERS_TOKEN)


@pytest.fixture
def openai_connection(actors: Actors, fake_upstream: FakeUpstream, catalogue: None) -> ProviderConnection:  # noqa: F811
    connection = ProviderConnection(
        team=actors.team,
        name="Gateway",
        kind=ConnectionKind.OPENAI_COMPATIBLE,
        base_url=fake_upstream.url + "/v1",
    )
    return connection_save(connection=connection, token="sk-gateway-abcdef")


def jsonl(rows: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(row) for row in rows) + "\n"


def prompts(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"messages": [{"role": "user", "content": f"Question {i}"}], **extra} for i in range(n)]


@pytest.fixture
def running_batch(actors: Actors) -> Callable[..., Batch]:
    """A confirmed batch of `rows` on `connection` (its chain is not started: tests run the steps)."""

    def make(
        connection: ProviderConnection, rows: list[dict[str, Any]], *, model: str = QUEUE_MODEL
    ) -> Batch:
        draft = batch_draft_create(
            user=actors.owner,
            connection_id=connection.pk,
            model_id=model,
            source=BatchInput(kind="jsonl", stream=utf8_lines(jsonl(rows))),
        )
        return batch_confirm(user=actors.owner, batch_id=draft.pk)

    return make
