"""Start-up self-test: a replica takes work only after generating tokens; a failing one stops the engine."""

from __future__ import annotations

from pathlib import Path

from tests.support.engine import GEMMA, MODEL_ID, EngineProcess, spawn_engine

EXIT_TIMEOUT = 120


def exit_log(engine: EngineProcess) -> tuple[int, str]:
    """Wait for an engine that must fail; its exit status and log."""
    try:
        code = engine.process.wait(timeout=EXIT_TIMEOUT)
    finally:
        engine.stop(hard=True)
    return code, engine.log_path.read_text(errors="replace")


def test_every_replica_reports_its_passed_self_test(engine: EngineProcess) -> None:
    replicas = engine.health()["replicas"]

    assert [replica["model"] for replica in replicas] == [MODEL_ID, MODEL_ID, GEMMA]
    for replica in replicas:
        assert replica["self_test"]["passed"] is True
        assert replica["self_test"]["tokens"] >= 1 and replica["self_test"]["seconds"] > 0


def test_a_replica_that_crashes_in_its_self_test_stops_the_engine_with_the_cause_and_fix(
    tmp_path: Path,
) -> None:
    # The same death an AMX or wrong-CPU build of llama.cpp dies on its first token.
    engine = spawn_engine(tmp_path, replicas=1, gemma_replicas=0, env={"ENGINE_SELF_TEST_FAULT": "segfault"})

    code, log = exit_log(engine)

    assert code == 1
    assert (
        "The engine cannot start. Replica 0 crashed (killed by SIGSEGV) during its start-up self-test" in log
    )
    assert "compiled for CPU features that do not work here" in log
    assert "rm -rf .venv var/wheels && make run" in log
    assert "Uvicorn running" not in log  # it never listened


def test_a_model_file_that_cannot_load_stops_the_engine_with_the_reason(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 60)  # a GGUF header and nothing else

    engine = spawn_engine(tmp_path, replicas=1, gemma_replicas=0, args=("--model", str(broken)))

    code, log = exit_log(engine)

    assert code == 1
    assert "The engine cannot start. Replica 0: The model could not be loaded" in log
    assert "Uvicorn running" not in log
