"""The durable queue behind `?queueRequest=true`: one SQLite file, safe across restarts.

Items are claimed by replicas of the batch's model that have no interactive work
(pull-based). An item that was running when the engine stopped or its replica died goes
back to `queued`, and is given up with an error after `MAX_ATTEMPTS`. A batch belongs to the account id it was
queued under: only that account can poll it, and its items use that account's prefix
cache. Every write is a committed transaction in
WAL mode with `synchronous=FULL`, so a finished result survives a crash of the engine.

The methods are synchronous and serialised by a lock; the front end calls them through
`asyncio.to_thread` so the event loop never waits on the disk.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_ATTEMPTS = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    request_id TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    account TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS items (
    request_id TEXT NOT NULL REFERENCES batches (request_id),
    position INTEGER NOT NULL,
    body TEXT NOT NULL,
    external_reference TEXT,
    status TEXT NOT NULL DEFAULT 'queued',  -- queued | running | done
    attempts INTEGER NOT NULL DEFAULT 0,
    success INTEGER,
    result TEXT,
    PRIMARY KEY (request_id, position)
);
CREATE INDEX IF NOT EXISTS items_by_status ON items (status);
"""


@dataclass(frozen=True)
class QueuedItem:
    request_id: str
    position: int
    body: dict[str, Any]
    attempts: int
    account: str
    model: str


class BatchQueue:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(batches)")}
        if "account" not in columns:  # a queue file written before batches had an account
            self._db.execute("ALTER TABLE batches ADD COLUMN account TEXT NOT NULL DEFAULT ''")
        # Whatever was running when the engine last stopped runs again.
        self._db.execute("UPDATE items SET status = 'queued' WHERE status = 'running'")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def submit(self, items: list[tuple[dict[str, Any], str | None]], account: str, model: str) -> str:
        """Store (body, external_reference) items of `account` for `model`; returns the batch's request id."""
        request_id = str(uuid.uuid4())
        with self._transaction() as db:
            db.execute(
                "INSERT INTO batches (request_id, model, account, created) VALUES (?, ?, ?, ?)",
                (request_id, model, account, time.time()),
            )
            db.executemany(
                "INSERT INTO items (request_id, position, body, external_reference) VALUES (?, ?, ?, ?)",
                [(request_id, index, json.dumps(body), ref) for index, (body, ref) in enumerate(items)],
            )
        return request_id

    def claim(self, model: str) -> QueuedItem | None:
        """Mark the oldest queued item for `model` as running and return it."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT items.rowid, items.request_id, position, body, attempts, account FROM items "
                "JOIN batches USING (request_id) WHERE status = 'queued' AND model = ? "
                "ORDER BY items.rowid LIMIT 1",
                (model,),
            ).fetchone()
            if row is None:
                return None
            rowid, request_id, position, body, attempts, account = row
            db.execute(
                "UPDATE items SET status = 'running', attempts = attempts + 1 WHERE rowid = ?", (rowid,)
            )
        return QueuedItem(request_id, position, json.loads(body), attempts + 1, account, model)

    def complete(self, item: QueuedItem, *, success: bool, result: Mapping[str, Any]) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE items SET status = 'done', success = ?, result = ? "
                "WHERE request_id = ? AND position = ?",
                (int(success), json.dumps(result), item.request_id, item.position),
            )

    def release(self, item: QueuedItem) -> bool:
        """Put an interrupted item back in the queue; False once it has used up its attempts."""
        if item.attempts >= MAX_ATTEMPTS:
            return False
        with self._transaction() as db:
            db.execute(
                "UPDATE items SET status = 'queued' WHERE request_id = ? AND position = ?",
                (item.request_id, item.position),
            )
        return True

    def unclaim(self, item: QueuedItem) -> None:
        """Hand back an item that was claimed but never started; it keeps its attempts."""
        with self._transaction() as db:
            db.execute(
                "UPDATE items SET status = 'queued', attempts = attempts - 1 "
                "WHERE request_id = ? AND position = ?",
                (item.request_id, item.position),
            )

    def waiting(self) -> list[tuple[str, str, int, float]]:
        """(model, status, items, oldest batch's creation time) of the items not done yet, for the
        metrics: one grouped read over the status index."""
        with self._lock:
            rows: list[tuple[str, str, int, float]] = self._db.execute(
                "SELECT model, status, COUNT(*), MIN(created) FROM items JOIN batches USING (request_id) "
                "WHERE status IN ('queued', 'running') GROUP BY model, status"
            ).fetchall()
        return rows

    def status(self, request_id: str, account: str) -> dict[str, Any] | None:
        """`{status, request_id, model}` while unfinished, the results once done.

        None if `account` queued no batch with that id.
        """
        with self._lock:
            batch = self._db.execute(
                "SELECT model FROM batches WHERE request_id = ? AND account = ?", (request_id, account)
            ).fetchone()
            if batch is None:
                return None
            rows = self._db.execute(
                "SELECT position, status, success, result, external_reference FROM items "
                "WHERE request_id = ? ORDER BY position",
                (request_id,),
            ).fetchall()
        statuses = {row[1] for row in rows}
        if statuses != {"done"}:
            status = "queued" if statuses == {"queued"} else "running"
            return {"status": status, "request_id": request_id, "model": batch[0]}
        responses = [
            {
                "id": position,
                "result": json.loads(result),
                "success": bool(success),
                "external_reference": ref,
            }
            for position, _, success, result, ref in rows
        ]
        return {"responses": responses, "usage": _total_usage(responses)}


def _total_usage(responses: list[dict[str, Any]]) -> dict[str, int]:
    totals = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    for response in responses:
        usage = response["result"].get("usage") if response["success"] else None
        for key in totals:
            totals[key] += int(usage.get(key, 0)) if isinstance(usage, Mapping) else 0
    return totals
