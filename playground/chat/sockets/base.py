"""What the chat socket and the compare socket share: who may connect, and one streaming task.

`connect()` lets in only a signed-in user who can see the socket's object (`find`, a lookup
scoped to the user's teams: another team's object is refused like a 404). Every message first
re-reads the session: a logout, a changed password or a deactivated account stops the task
and closes the socket; otherwise `parse()` reads it (a `BadCommand` is shown as a notice) and
`command()` acts on it.

A socket runs one task at a time (a chat turn, a comparison's run). `start()` refuses a second
one while the first streams, takes one of the user's concurrent-turn slots (`chat.limits`;
the turn rate counts it once), opens the work through the subclass (its service call, which
may refuse) and runs it in a task that holds the slot until it ends. Stop and a disconnect
cancel that task; the metered call under it writes its usage record while it unwinds, and we
wait for that, so the record exists once the socket is gone (`stop()`).

Every frame sent is a rendered template from `templates/chat/ws/` whose top-level elements
carry stable ids and `hx-swap-oob`; nothing here builds HTML from strings.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.template.loader import render_to_string

from playground.accounts.selectors import AnyUser, asession_user_id
from playground.chat.limits import TurnRefused, turn_admit
from playground.chat.sockets.commands import BadCommand
from playground.chat.sockets.relay import DeltaFrames, FrameRelay
from playground.providers.events import StreamEvent

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
SIGNED_OUT = "You are signed out (or your account was deactivated): sign in again to continue."


class StreamingSocket[Command](AsyncWebsocketConsumer):
    """A socket over one object of the user's teams that streams one task at a time; `Command`
    is what one of its messages asks for."""

    # Each task streams to its own socket and nothing is broadcast, so the sockets stay off the
    # channel layer: no Redis round trip per socket, and no dependency on its health.
    channel_layer_alias = None
    url_kwarg: str  # the route's id of the object (`conversation_id`, `comparison_id`)
    busy: str  # the notice for a second task while one streams
    object_id: int
    task: asyncio.Task[None] | None = None

    # --- what a subclass says -----------------------------------------------------------

    async def find(self, *, user: AnyUser, object_id: int) -> int | None:
        """The object's id if the user may open a socket on it; None: refused like a 404."""
        raise NotImplementedError

    def parse(self, text_data: str | None) -> Command:
        """What one message asks for; `BadCommand` (shown as a notice) when it asks nothing we do."""
        raise NotImplementedError

    async def command(self, command: Command) -> None:
        """Act on one parsed message from a user still signed in."""
        raise NotImplementedError

    def mark_stopped(self, *, by_user: bool) -> None:
        """Tell the running task's metered calls whether the user pressed Stop (their records say so)."""

    # --- the skeleton -------------------------------------------------------------------

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        found = await self.find(user=user, object_id=self.scope["url_route"]["kwargs"][self.url_kwarg])
        if found is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.object_id = found
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.stop()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not await still_signed_in(self.scope):
            await self._notice(SIGNED_OUT)
            await self.stop()
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        try:
            command = self.parse(text_data)
        except BadCommand as exc:
            await self._notice(str(exc))
            return
        await self.command(command)

    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    async def start[Work](
        self,
        open_work: Callable[[], Awaitable[Work | None]],
        run: Callable[[Work], Awaitable[None]],
        *,
        name: Callable[[Work], str],
    ) -> None:
        """Open the work (None: refused, after a notice) and run it in the socket's task,
        which holds one of the user's concurrent-turn slots until `run` ends."""
        if self.running():
            await self._notice(self.busy)
            return
        try:
            slot = await turn_admit(user_id=self.scope["user"].pk)
        except TurnRefused as exc:
            await self._notice(str(exc))
            return
        work: Work | None = None
        try:
            work = await open_work()
        finally:
            if work is None:  # refused or failed: no task will hold the slot
                await slot.release()
        if work is None:
            return

        async def holding_the_slot(work: Work) -> None:
            try:
                await run(work)
            finally:
                await slot.release()  # the records are written by now (the metered calls ended)
            await self.after_run()

        self.task = asyncio.create_task(holding_the_slot(work), name=name(work))

    async def after_run(self) -> None:
        """Sent once the task has ended and given its slot back (compare: the run is over)."""

    async def stop(self, *, by_user: bool = False) -> bool:
        """Cancel the running task and wait until its records are written; False if none ran.
        `by_user`: the user pressed Stop (the records say so), not a socket that went away."""
        task = self.task
        if task is None or task.done():
            return False
        self.mark_stopped(by_user=by_user)
        task.cancel()
        await asyncio.wait({task})
        if not task.cancelled() and task.exception() is not None:
            logger.warning("%s ended with %r", task.get_name(), task.exception())
        return True

    # --- frames -------------------------------------------------------------------------

    async def relay(self, key: int | str, events: AsyncGenerator[StreamEvent]) -> None:
        """Relay an answer's text as it streams, keyed by its DOM key (`chat.sockets.relay`). The
        events are read here, in the socket's task, so that Stop or a disconnect cancels the
        read and the metered call under them writes its record while it unwinds."""
        frames = DeltaFrames({"key": key})
        interval = settings.CHAT_STREAM_FRAME_MS / 1000
        async with (
            FrameRelay(frames, self.send, interval=interval) as relay,
            aclosing(events) as opened,
        ):
            async for event in opened:
                relay.add(event)

    async def _notice(self, text: str) -> None:
        await self._send_template("chat/ws/notice.html", {"text": text})

    async def _send_template(self, template: str, context: dict[str, Any]) -> None:
        await self.send(text_data=render_to_string(template, context))

    async def _send_quietly(self, template: str, context: dict[str, Any]) -> None:
        """For the end of an answer: the client may be gone, and the answer is stored anyway."""
        try:
            await self._send_template(template, context)
        except Exception:
            logger.info("could not send %s: the client went away", template)


async def still_signed_in(scope: dict[str, Any]) -> bool:
    """The session that opened the socket still signs in its user, and the user is active."""
    session = scope.get("session")
    user_id = await asession_user_id(session_key=session.session_key if session else None)
    return user_id is not None and user_id == scope["user"].pk
