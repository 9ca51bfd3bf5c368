"""The durable queue file: claims, results, and recovery after a crash."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from playground.engine.batch_queue import MAX_ATTEMPTS, BatchQueue

BODY = {"prompt": "hi", "max_tokens": 1}
ACCOUNT = "team-1"
RESULT = {
    "object": "chat.completion",
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


def test_it_hands_out_items_oldest_first_and_reports_progress(tmp_path: Path) -> None:
    queue = BatchQueue(tmp_path / "q.sqlite3")
    request_id = queue.submit([(BODY, "a"), (BODY, "b")], ACCOUNT, "m")

    assert queue.status(request_id, ACCOUNT) == {"status": "queued", "request_id": request_id, "model": "m"}
    first = queue.claim("m")
    assert first is not None and first.position == 0 and first.attempts == 1
    assert first.account == ACCOUNT  # its items use the account's prefix cache
    assert queue.status(request_id, ACCOUNT)["status"] == "running"  # type: ignore[index]


def test_it_reports_results_and_total_usage_once_every_item_is_done(tmp_path: Path) -> None:
    queue = BatchQueue(tmp_path / "q.sqlite3")
    request_id = queue.submit([(BODY, "a"), (BODY, None)], ACCOUNT, "m")
    first, second = queue.claim("m"), queue.claim("m")
    assert first is not None and second is not None
    queue.complete(first, success=True, result=RESULT)
    queue.complete(second, success=False, result={"errors": [{"code": 8001, "message": "no"}]})

    assert queue.status(request_id, ACCOUNT) == {
        "responses": [
            {"id": 0, "result": RESULT, "success": True, "external_reference": "a"},
            {
                "id": 1,
                "result": {"errors": [{"code": 8001, "message": "no"}]},
                "success": False,
                "external_reference": None,
            },
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }


def test_it_requeues_running_items_when_reopened_after_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "q.sqlite3"
    queue = BatchQueue(path)
    request_id = queue.submit([(BODY, None)], ACCOUNT, "m")
    assert queue.claim("m") is not None  # running when the "crash" happens; never closed

    reopened = BatchQueue(path)

    assert reopened.status(request_id, ACCOUNT)["status"] == "queued"  # type: ignore[index]
    item = reopened.claim("m")
    assert item is not None and item.attempts == 2


def test_it_gives_up_on_an_item_after_its_attempts(tmp_path: Path) -> None:
    queue = BatchQueue(tmp_path / "q.sqlite3")
    queue.submit([(BODY, None)], ACCOUNT, "m")
    for _ in range(MAX_ATTEMPTS - 1):
        item = queue.claim("m")
        assert item is not None and queue.release(item)
    item = queue.claim("m")

    assert item is not None and queue.release(item) is False


def test_it_hands_out_items_only_to_their_own_model(tmp_path: Path) -> None:
    queue = BatchQueue(tmp_path / "q.sqlite3")
    queue.submit([(BODY, None)], ACCOUNT, "old")

    assert queue.claim("new") is None
    item = queue.claim("old")
    assert item is not None and item.model == "old"


def test_it_knows_nothing_of_an_unknown_request_id(tmp_path: Path) -> None:
    assert BatchQueue(tmp_path / "q.sqlite3").status("nope", ACCOUNT) is None


def test_only_the_account_that_queued_a_batch_can_poll_it(tmp_path: Path) -> None:
    queue = BatchQueue(tmp_path / "q.sqlite3")
    request_id = queue.submit([(BODY, None)], ACCOUNT, "m")

    assert queue.status(request_id, "team-2") is None
    assert queue.status(request_id, ACCOUNT) is not None


def test_it_upgrades_a_queue_file_written_before_batches_had_an_account(tmp_path: Path) -> None:
    path = tmp_path / "q.sqlite3"
    with sqlite3.connect(path) as old:
        old.executescript(
            "CREATE TABLE batches (request_id TEXT PRIMARY KEY, model TEXT NOT NULL, created REAL NOT NULL);"
            "CREATE TABLE items (request_id TEXT NOT NULL, position INTEGER NOT NULL, body TEXT NOT NULL,"
            " external_reference TEXT, status TEXT NOT NULL DEFAULT 'queued',"
            " attempts INTEGER NOT NULL DEFAULT 0, success INTEGER, result TEXT);"
            "INSERT INTO batches VALUES ('old-batch', 'm', 0);"
            "INSERT INTO items (request_id, position, body) VALUES ('old-batch', 0, '{}');"
        )

    queue = BatchQueue(path)

    assert queue.status("old-batch", "") == {"status": "queued", "request_id": "old-batch", "model": "m"}
    assert queue.status(queue.submit([(BODY, None)], ACCOUNT, "m"), ACCOUNT) is not None
