"""A replica that dies: its request gets an error, routing avoids it, and it comes back."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable

import httpx
from cloudflare import Cloudflare

from tests.engine.helpers import still_serves
from tests.support.engine import EngineProcess


def wait_for(condition: Callable[[], bool], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_it_answers_in_flight_work_with_an_error_and_restarts_a_killed_replica(engine: EngineProcess) -> None:
    body = {
        "messages": [{"role": "user", "content": "Tell me a long story."}],
        "max_tokens": 300,
        "stream": True,
    }
    headers = {**engine.headers, "x-session-affinity": "ses_crash_test"}
    with httpx.stream("POST", engine.run_url(), headers=headers, json=body, timeout=60) as response:
        index = int(response.headers["x-engine-replica"])
        victim = engine.health()["replicas"][index]
        lines = response.iter_lines()
        assert next(lines).startswith("data: ")  # the answer has started
        os.kill(victim["pid"], signal.SIGKILL)
        frames = [
            json.loads(line[6:]) for line in lines if line.startswith("data: ") and line != "data: [DONE]"
        ]

    last = frames[-1]
    assert last["success"] is False
    assert last["errors"][0]["code"] == 5001
    assert "restarted" in last["errors"][0]["message"]

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        replica = engine.health()["replicas"][index]
        if replica["ready"]:
            break
        time.sleep(0.2)
    assert replica["ready"] and replica["pid"] != victim["pid"]
    assert replica["restarts"] == victim["restarts"] + 1
    retry = httpx.post(
        engine.run_url(), headers=headers, json={"messages": body["messages"], "max_tokens": 2}, timeout=60
    )
    assert retry.status_code == 200 and retry.headers["x-engine-replica"] == str(index)
    assert still_serves(engine)


def test_round_robin_skips_a_dead_replica_until_it_is_back(cf: Cloudflare, engine: EngineProcess) -> None:
    victim = engine.health()["replicas"][0]
    os.kill(victim["pid"], signal.SIGKILL)
    wait_for(lambda: not engine.health()["replicas"][0]["ready"])

    replicas = [
        cf.ai.with_raw_response.run(
            engine.model_id, account_id="test", messages=[{"role": "user", "content": "Hi"}], max_tokens=1
        ).headers["x-engine-replica"]
        for _ in range(3)
    ]
    assert replicas == ["1", "1", "1"]  # while replica 0 restarts, the survivor takes every turn

    wait_for(lambda: engine.health()["replicas"][0]["ready"])
    assert engine.health()["replicas"][0]["self_test"]["passed"] is True  # it passed again
