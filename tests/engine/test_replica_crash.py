"""A replica that dies mid-answer: the request gets an error, the replica comes back."""

from __future__ import annotations

import json
import os
import signal
import time

import httpx

from tests.engine.helpers import still_serves
from tests.support.engine import EngineProcess


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
