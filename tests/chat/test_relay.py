"""The frame relay: delta fragments rendered once per turn, text coalesced per frame interval."""

from __future__ import annotations

import asyncio

import pytest
from django.template.loader import render_to_string

from playground.chat.sockets.relay import TEMPLATES, DeltaFrames, FrameRelay
from playground.providers.events import Finish, ReasoningDelta, TextDelta

HOSTILE = ['<img src=x onerror="alert(1)">', "a & b ' \" `", "{{ key }} {% if %}", "\u00e9\U0001f600", ""]
Kind = type[TextDelta | ReasoningDelta]


@pytest.mark.parametrize("kind", list(TEMPLATES))
@pytest.mark.parametrize("text", HOSTILE)
def test_a_delta_frame_is_what_its_template_renders(kind: Kind, text: str) -> None:
    frames = DeltaFrames({"key": 42})

    assert frames.render(kind, text) == render_to_string(TEMPLATES[kind], {"key": 42, "text": text})


class Socket:
    """Records what the relay sends, and when, on the loop's clock."""

    def __init__(self, *, fail: bool = False) -> None:
        self.sent: list[tuple[float, str]] = []
        self.fail = fail

    async def send(self, frame: str) -> None:
        if self.fail:
            raise ConnectionError("the client went away")
        self.sent.append((asyncio.get_running_loop().time(), frame))


def relay(socket: Socket, interval: float) -> FrameRelay:
    return FrameRelay(DeltaFrames({"key": 7}), socket.send, interval=interval)


def text_frame(text: str) -> str:
    return DeltaFrames({"key": 7}).render(TextDelta, text)


async def test_the_first_text_goes_out_at_once_and_text_within_the_interval_joins_the_next_frame() -> None:
    socket = Socket()
    loop = asyncio.get_running_loop()
    async with relay(socket, interval=0.2) as frames:
        started = loop.time()
        frames.add(TextDelta("Hello"))
        await asyncio.sleep(0.01)
        for word in (", ", "world", "."):
            frames.add(TextDelta(word))
            await asyncio.sleep(0.01)

    assert [frame for _, frame in socket.sent] == [text_frame("Hello"), text_frame(", world.")]
    first, second = (at - started for at, _ in socket.sent)
    assert first < 0.05
    assert second >= 0.2  # held until the interval after the first frame was over


async def test_with_no_interval_each_text_goes_out_as_it_comes_when_the_relay_keeps_up() -> None:
    socket = Socket()
    async with relay(socket, interval=0) as frames:
        for word in ("a", "b", "c"):
            frames.add(TextDelta(word))
            await asyncio.sleep(0.005)

    assert [frame for _, frame in socket.sent] == [text_frame(word) for word in "abc"]


async def test_reasoning_and_text_of_one_frame_keep_their_own_targets_reasoning_first() -> None:
    socket = Socket()
    async with relay(socket, interval=0.05) as frames:
        frames.add(TextDelta("answer"))  # one frame of its own: nothing else is queued yet
        await asyncio.sleep(0.01)
        frames.add(ReasoningDelta("late thought"))
        frames.add(TextDelta(" goes on"))
        frames.add(Finish(reason="stop"))  # not text: shown from the stored answer at the end

    rendered = DeltaFrames({"key": 7})
    assert [frame for _, frame in socket.sent] == [
        text_frame("answer"),
        rendered.render(ReasoningDelta, "late thought") + text_frame(" goes on"),
    ]


async def test_a_normal_end_sends_the_text_still_queued_before_it_returns() -> None:
    socket = Socket()
    async with relay(socket, interval=10) as frames:
        frames.add(TextDelta("first"))
        await asyncio.sleep(0.01)
        frames.add(TextDelta("last"))

    assert [frame for _, frame in socket.sent] == [text_frame("first"), text_frame("last")]


async def test_a_cancelled_turn_drops_the_queued_text_and_stays_cancelled() -> None:
    socket = Socket()

    async def turn() -> None:
        async with relay(socket, interval=10) as frames:
            frames.add(TextDelta("shown"))
            await asyncio.sleep(0.01)
            frames.add(TextDelta("dropped"))
            await asyncio.sleep(10)  # the upstream read a Stop cancels

    task = asyncio.create_task(turn())
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert [frame for _, frame in socket.sent] == [text_frame("shown")]


async def test_a_failed_send_stops_the_turn_at_its_next_text() -> None:
    socket = Socket(fail=True)
    with pytest.raises(ConnectionError):
        async with relay(socket, interval=0) as frames:
            frames.add(TextDelta("lost"))
            await asyncio.sleep(0.01)
            frames.add(TextDelta("never queued"))


async def test_the_turns_own_error_is_the_one_raised_when_the_relay_failed_too() -> None:
    socket = Socket(fail=True)
    with pytest.raises(TimeoutError):
        async with relay(socket, interval=0) as frames:
            frames.add(TextDelta("lost"))
            await asyncio.sleep(0.01)
            raise TimeoutError("the upstream stalled")
