"""The compare WebSocket: runs every column of a comparison at once and streams them side by side.

The skeleton is the chat's (`sockets.base.StreamingSocket`): a signed-in member of the
comparison's team connects, each message re-reads the session, one run streams at a time
holding one of the user's concurrent-turn slots (a run is one action, however many columns it
has), and Stop or a disconnect cancels it and waits for the records. What is compare's own: the
one message (`compare_command_parse`), handed to the service (`comparison_run_start`), which
checks the role again.

Each column streams in a task of its own under the run's task, through the same relay as a
chat answer (keyed `c<column id>`). A column's end (its answer, an upstream error, a budget
refusal) is sent as soon as it ends; the others carry on. Stop and a disconnect cancel the run:
each column's metered call still writes its record, and we wait for that before the socket is
gone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from channels.db import database_sync_to_async
from django.core.exceptions import PermissionDenied, ValidationError

from playground.accounts.selectors import AnyUser
from playground.chat.compare.presenters import column_key, column_view
from playground.chat.compare.selectors import acomparison_get
from playground.chat.compare.services import ColumnRun, ComparisonNotFound, comparison_run_start
from playground.chat.sockets.base import CLOSE_NOT_FOUND, StreamingSocket
from playground.chat.sockets.commands import compare_command_parse

logger = logging.getLogger(__name__)

BUSY = "The comparison is still running: wait for it to finish, or press Stop."
GONE = "This comparison is no longer available to you."


class CompareConsumer(StreamingSocket[str]):
    url_kwarg = "comparison_id"
    busy = BUSY
    runs: Sequence[ColumnRun] = ()  # the run streaming, or the last one
    shown: set[int]  # columns of `runs` whose end was sent

    async def find(self, *, user: AnyUser, object_id: int) -> int | None:
        comparison = await acomparison_get(user=user, comparison_id=object_id)
        return None if comparison is None else comparison.pk

    def mark_stopped(self, *, by_user: bool) -> None:
        for run in self.runs:
            if run.call is not None:
                run.call.stopped_by_user = by_user

    def parse(self, text_data: str | None) -> str:
        return compare_command_parse(text_data)

    async def command(self, action: str) -> None:
        if action == "stop":
            if await self.stop(by_user=True):
                await self._show_ends()
            return
        first = action == "run"
        await self.start(
            lambda: self._open(first=first), self._run, name=lambda _: f"compare-{self.object_id}"
        )

    async def _open(self, *, first: bool) -> list[ColumnRun] | None:
        """Store the run and show its columns; None when refused, or when the page's first run
        was already made (a reload)."""
        runs: list[ColumnRun] = []
        try:
            runs = await database_sync_to_async(comparison_run_start)(
                user=self.scope["user"], comparison_id=self.object_id, first=first
            )
        except ComparisonNotFound:
            await self._notice(GONE)
            await self.close(code=CLOSE_NOT_FOUND)
        except (PermissionDenied, ValidationError) as exc:
            await self._notice(
                " ".join(getattr(exc, "messages", [])) or str(exc) or "You may not run comparisons."
            )
        if not runs:
            return None
        self.runs, self.shown = runs, set()
        columns = [column_view(run.column) for run in runs]
        await self._send_template("chat/ws/compare_started.html", {"columns": columns})
        return runs

    async def _run(self, runs: Sequence[ColumnRun]) -> None:
        await asyncio.gather(*(self._column(run) for run in runs))

    async def after_run(self) -> None:
        await self._send_quietly("chat/ws/compare_finished.html", {})

    async def _column(self, run: ColumnRun) -> None:
        """Stream one column, then show its stored answer (or why nothing was sent)."""
        if run.call is not None:
            try:
                await self.relay(column_key(run.column.pk), run.events())
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("a compare column failed while streaming")
        await self._show_end(run)

    async def _show_end(self, run: ColumnRun) -> None:
        if run.column.pk in self.shown or (run.call is not None and run.call.outcome is None):
            return
        self.shown.add(run.column.pk)
        context = {"column": column_view(run.column), "refusal": run.refusal, "oob": True}
        await self._send_quietly("chat/ws/compare_column.html", context)

    async def _show_ends(self) -> None:
        for run in self.runs:
            await self._show_end(run)
        await self._send_quietly("chat/ws/compare_finished.html", {})
