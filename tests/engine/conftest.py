"""Engine tests drive one real engine process with the official Cloudflare and OpenAI SDKs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cloudflare import Cloudflare
from openai import OpenAI

from tests.support.engine import GEMMA, MODEL_ID, EngineProcess


@pytest.fixture
def local_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip finds packages in this folder only (never on PyPI): `pip download` reads
    `PIP_NO_INDEX` and `PIP_FIND_LINKS` from the environment."""
    folder = tmp_path / "index"
    folder.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip-cache"))
    return folder


@pytest.fixture
def engine(running_engine: EngineProcess) -> EngineProcess:
    return running_engine


@pytest.fixture(params=[MODEL_ID, GEMMA], ids=["default-model", "gemma"])
def each_model(request: pytest.FixtureRequest) -> str:
    """Each model the engine serves, for what must hold on both (grammar-constrained output)."""
    model: str = request.param
    return model


@pytest.fixture
def cf(engine: EngineProcess) -> Iterator[Cloudflare]:
    # No SDK retries: a test must see the engine's first answer, errors included.
    with Cloudflare(base_url=f"{engine.url}/client/v4", api_token=engine.token, max_retries=0) as client:
        yield client


@pytest.fixture
def oa(engine: EngineProcess) -> Iterator[OpenAI]:
    base_url = f"{engine.url}/client/v4/accounts/test/ai/v1"
    with OpenAI(base_url=base_url, api_key=engine.token, max_retries=0) as client:
        yield client
