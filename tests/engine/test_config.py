"""Every flag has an ENGINE_* variable; flags win; defaults need nothing set."""

from __future__ import annotations

from pathlib import Path

import pytest

from playground.engine.config import load_config


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [
        "ENGINE_HOST", "ENGINE_PORT", "ENGINE_REPLICAS", "ENGINE_GEMMA_REPLICAS", "ENGINE_BALANCE",
        "ENGINE_MODEL_PATH",
        "ENGINE_MODEL_ID", "ENGINE_CHAT_FORMAT", "ENGINE_CONTEXT_SIZE", "ENGINE_GEMMA_CONTEXT_SIZE",
        "ENGINE_THREADS",
        "ENGINE_PREFIX_CACHE_BYTES",
        "ENGINE_CACHE_DIR", "ENGINE_QUEUE_PATH", "ENGINE_MAX_BODY_BYTES", "ENGINE_DEFAULT_MAX_TOKENS",
        "ENGINE_LOG_LEVEL", "ENGINE_API_TOKEN", "ENGINE_API_TOKEN_FILE", "PLAYGROUND_DATA_DIR",
        "ENGINE_MODEL", "ENGINE_QUALITY_REPLICAS", "ENGINE_QUALITY_CONTEXT_SIZE", "ENGINE_QUALITY_THREADS",
    ]:  # fmt: skip
        monkeypatch.delenv(name, raising=False)


def test_it_serves_the_packaged_smollm2_with_gemma_beside_it_by_default() -> None:
    config = load_config([])

    assert (config.host, config.port, config.replicas, config.gemma_replicas) == ("127.0.0.1", 8788, 5, 1)
    assert config.balance == "round-robin"
    assert config.model_path is None and config.model_id == "@local/smollm2-135m-instruct"
    assert config.chat_format == ""  # the template inside SmolLM2's GGUF
    assert config.cache_dir == Path("var/models")
    assert config.queue_path == Path("var/engine-queue.sqlite3")
    assert config.api_token == ""


def test_it_reads_every_setting_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PLAYGROUND_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ENGINE_PORT", "9000")
    monkeypatch.setenv("ENGINE_REPLICAS", "3")
    monkeypatch.setenv("ENGINE_GEMMA_REPLICAS", "0")
    monkeypatch.setenv("ENGINE_BALANCE", "least-loaded")
    monkeypatch.setenv("ENGINE_MODEL_PATH", "/models/Qwen2.5-0.5B-Instruct-Q4_K_M.gguf")
    monkeypatch.setenv("ENGINE_CHAT_FORMAT", "chatml")
    monkeypatch.setenv("ENGINE_CONTEXT_SIZE", "8192")
    monkeypatch.setenv("ENGINE_THREADS", "4")
    monkeypatch.setenv("ENGINE_API_TOKEN", "s3cret")

    config = load_config([])

    assert (config.port, config.replicas, config.context_size, config.threads) == (9000, 3, 8192, 4)
    assert config.gemma_replicas == 0
    assert config.model_id == "@local/qwen2.5-0.5b-instruct-q4-k-m"  # named after the file
    assert config.chat_format == "chatml" and config.balance == "least-loaded"
    assert config.cache_dir == tmp_path / "models"
    assert config.queue_path == tmp_path / "engine-queue.sqlite3"
    assert config.api_token == "s3cret"


def test_it_lets_a_flag_win_over_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGINE_REPLICAS", "3")
    monkeypatch.setenv("ENGINE_MODEL_ID", "@local/from-env")

    config = load_config(["--replicas", "1", "--model-id", "@local/from-flag"])

    assert config.replicas == 1 and config.model_id == "@local/from-flag"


def test_it_reads_the_token_from_a_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-a-file\n")
    monkeypatch.setenv("ENGINE_API_TOKEN_FILE", str(tmp_path / "token"))

    assert load_config([]).api_token == "from-a-file"


def test_it_refuses_zero_replicas_of_the_default_model_but_not_of_gemma() -> None:
    with pytest.raises(SystemExit):
        load_config(["--replicas", "0"])
    assert load_config(["--gemma-replicas", "0"]).gemma_replicas == 0


def test_each_model_may_have_its_own_context_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Raise SmolLM2 to its trained 8,192 tokens and keep Gemma (trained on 32,768) at 4,096."""
    assert (load_config([]).context_size, load_config([]).gemma_context_size) == (4096, 4096)
    assert load_config(["--context-size", "8192"]).gemma_context_size == 8192  # unless set, the same

    monkeypatch.setenv("ENGINE_GEMMA_CONTEXT_SIZE", "4096")
    config = load_config(["--context-size", "8192"])

    assert (config.context_size, config.gemma_context_size) == (8192, 4096)
    assert load_config(["--gemma-context-size", "0"]).gemma_context_size == 0  # its trained length


def test_it_shares_the_cores_among_every_replica(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 12)

    assert load_config(["--replicas", "3", "--gemma-replicas", "1"]).threads == 3
    assert load_config(["--replicas", "5", "--gemma-replicas", "2"]).threads == 1


def test_it_refuses_to_serve_another_model_under_gemmas_id(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        load_config(["--model", "/models/x.gguf", "--model-id", "@local/gemma-3-270m"])
    assert "@local/gemma-3-270m is the packaged Gemma's id" in capsys.readouterr().err

    alone = load_config(
        ["--model", "/models/x.gguf", "--model-id", "@local/gemma-3-270m", "--gemma-replicas", "0"]
    )
    assert alone.model_id == "@local/gemma-3-270m"


def test_it_refuses_an_unknown_balance_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ENGINE_BALANCE", "random")

    with pytest.raises(SystemExit):
        load_config([])
    assert "ENGINE_BALANCE must be one of round-robin, least-loaded" in capsys.readouterr().err


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::", "engine.example.com"])
def test_without_a_token_it_refuses_to_serve_beyond_loopback(
    host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        load_config(["--host", host])
    assert f"refusing to serve {host} without authentication" in capsys.readouterr().err


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_without_a_token_it_serves_loopback(host: str) -> None:
    assert load_config(["--host", host]).host == host


def test_with_a_token_it_serves_any_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGINE_API_TOKEN", "s3cret")

    assert load_config(["--host", "0.0.0.0"]).host == "0.0.0.0"


def test_the_quality_model_is_served_only_when_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert load_config([]).quality_replicas == 0  # SmolLM2 and Gemma only, unless chosen

    monkeypatch.setenv("ENGINE_MODEL", "quality")
    config = load_config([])

    assert (config.quality_replicas, config.quality_context_size, config.quality_threads) == (1, 8192, 2)
    assert (config.model_id, config.replicas, config.gemma_replicas) == ("@local/smollm2-135m-instruct", 5, 1)
    assert config.threads == 1  # the small models' share is unchanged: cores / their replicas
    assert load_config(["--quality-replicas", "0"]).quality_replicas == 0


def test_it_refuses_an_engine_model_it_does_not_know(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ENGINE_MODEL", "qwen")

    with pytest.raises(SystemExit):
        load_config([])

    assert "ENGINE_MODEL must be one of smollm2, quality; got 'qwen'" in capsys.readouterr().err
