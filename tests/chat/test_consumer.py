"""The chat WebSocket against the real ASGI app and the loopback fake Workers AI upstream."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import pytest
from django.conf import LazySettings

from playground.accounts.models import Membership, Role
from playground.chat.models import Conversation, Message, MessageRole
from playground.usage.metering import STOPPED_BY_USER
from playground.usage.models import UsageRecord, UsageSource, UsageStatus
from tests.fakes.upstream import FakeUpstream, error, native_frame, openai_chunk, sse, usage
from tests.support.actors import Actors
from tests.support.connections import WORKERS_TOKEN
from tests.support.sockets import FINISHED, Socket, slow_turn_started

pytestmark = pytest.mark.django_db(transaction=True)

OpenSocket = Callable[[str | None, int], Socket]
STREAMING = 'data-state="streaming"'


def delta_frames(frames: list[str], user_message_id: int) -> list[str]:
    return [frame for frame in frames if f'id="answer-{user_message_id}-text"' in frame]


async def last_user_message(conversation: Conversation) -> Message:
    message = await Message.objects.filter(conversation=conversation, role=MessageRole.USER).alast()
    assert message is not None
    return message


async def the_record(conversation: Conversation) -> UsageRecord:
    return await UsageRecord.objects.select_related("price_card").aget(conversation_id=conversation.pk)


# --- streaming ----------------------------------------------------------------------------


async def test_a_streamed_answer_arrives_in_several_frames_and_ends_with_the_usage_line(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(
        sse(
            [
                native_frame("Hello "),
                native_frame("**bold** "),
                native_frame("world."),
                native_frame("", usage=usage(1234, 56, cached=1000)),
            ],
            delay=0.01,
        )
    )
    frames = await open_socket("owner", conversation.pk).exchange("Say hello <b>please</b>")

    question = await last_user_message(conversation)
    started, *streamed, finished = frames
    assert "Say hello &lt;b&gt;please&lt;/b&gt;" in started
    assert STREAMING in started
    assert 'id="chat-title" hx-swap-oob="true">Say hello &lt;b&gt;please&lt;/b&gt;</h1>' in started
    deltas = delta_frames(streamed, question.pk)
    assert len(deltas) == 3
    assert 'hx-swap-oob="beforeend"' in deltas[0]
    assert "**bold**" in deltas[1]  # raw while streaming, escaped by the template
    assert "<strong>bold</strong>" in finished  # rendered once the answer ended
    assert f'hx-swap-oob="outerHTML:#answer-{question.pk}"' in finished
    assert "1,234 in" in finished
    assert "1,000 cached (81%)" in finished
    assert "56 out" in finished
    assert "TTFT" in finished
    assert "Workers AI list price for Kimi K2.6" in finished
    assert 'data-state="idle"' in finished

    record = await the_record(conversation)
    assert record.status == UsageStatus.OK
    assert (record.prompt_tokens, record.cached_tokens, record.completion_tokens) == (1234, 1000, 56)
    assert record.usage_source == UsageSource.PROVIDER
    request = fake_upstream.requests[0]
    assert request.path.endswith("/ai/run/@cf/moonshotai/kimi-k2.6")
    assert request.headers["authorization"] == f"Bearer {WORKERS_TOKEN}"
    assert request.headers["x-session-affinity"] == conversation.affinity_key
    assert request.json["messages"][0] == {"role": "system", "content": "Be brief."}


async def test_reasoning_streams_into_a_collapsed_section(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(
        sse(
            [
                openai_chunk(reasoning="Let me think. "),
                openai_chunk(reasoning="Two plus two."),
                openai_chunk("4"),
                openai_chunk(finish_reason="stop"),
                native_frame("", usage=usage(20, 9)),
            ]
        )
    )
    frames = await open_socket("owner", conversation.pk).exchange("2+2?")

    question = await last_user_message(conversation)
    assert any(f'id="answer-{question.pk}-reasoning-text"' in frame for frame in frames)
    assert '<details class="reasoning">' in frames[-1]
    assert "Two plus two." in frames[-1]
    assert "— cached" in frames[-1]  # the provider did not say: not "0 cached"


def streamed(frames: list[str], target: str) -> list[str]:
    """The text each frame appended to the element `target`, unescaped."""
    pattern = re.compile(f'<div id="{target}" hx-swap-oob="beforeend">(.*?)</div>', re.DOTALL)
    return [html.unescape(text) for frame in frames for text in pattern.findall(frame)]


async def test_text_arriving_within_one_frame_interval_is_sent_as_one_frame_and_reads_the_same(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream, settings: LazySettings
) -> None:
    settings.CHAT_STREAM_FRAME_MS = 300  # far longer than the whole stream after its first chunk
    thinking = ["Two ", "<and> ", "two."]
    words = ["It ", "is ", "**4** ", "& ", "<b>not</b> ", "5."]
    fake_upstream.script(
        sse(
            [
                *(openai_chunk(reasoning=part) for part in thinking),
                *(openai_chunk(word) for word in words),
                openai_chunk(finish_reason="stop"),
                native_frame("", usage=usage(20, 9)),
            ],
            delay=0.01,
        )
    )
    frames = await open_socket("owner", conversation.pk).exchange("2+2?")

    key = (await last_user_message(conversation)).pk
    _, *streaming, finished = frames
    assert len(streaming) <= 2  # the first chunk goes at once; the other eight within the interval
    assert "".join(streamed(streaming, f"answer-{key}-reasoning-text")) == "Two <and> two."
    assert streamed(streaming, f"answer-{key}-text") == ["It is **4** & <b>not</b> 5."]
    last = streaming[-1]
    assert last.index(f'"answer-{key}-reasoning-text"') < last.index(f'"answer-{key}-text"')
    assert "&lt;b&gt;not&lt;/b&gt;" in last  # escaped in the frame, as the template does
    answer = await Message.objects.aget(conversation=conversation, role=MessageRole.ASSISTANT)
    assert answer.content == "".join(words)
    assert answer.reasoning == "".join(thinking)
    assert "<strong>4</strong> &amp; &lt;b&gt;not&lt;/b&gt; 5." in finished


async def test_hostile_model_output_is_escaped_while_streaming_and_sanitized_at_the_end(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(
        sse(
            [
                native_frame("<img src=x onerror=alert(1)> "),
                native_frame("[click](javascript:alert(1)) "),
                native_frame("<script>alert(2)</script>"),
                native_frame("", usage=usage(5, 5)),
            ]
        )
    )
    frames = await open_socket("owner", conversation.pk).exchange("Be evil")

    everything = "".join(frames)
    assert "<img" not in everything
    assert "<script" not in everything
    assert 'href="javascript' not in everything
    assert "&lt;img src=x onerror=alert(1)&gt;" in frames[-1]


# --- upstream failures ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"), [(503, UsageStatus.UPSTREAM_ERROR), (429, UsageStatus.REJECTED)]
)
async def test_an_upstream_failure_ends_with_the_error_shown_and_recorded(
    open_socket: OpenSocket,
    conversation: Conversation,
    fake_upstream: FakeUpstream,
    settings: LazySettings,
    status: int,
    expected: str,
) -> None:
    settings.UPSTREAM_MAX_RETRIES = 0
    fake_upstream.script(error(status, retry_after=0))
    frames = await open_socket("owner", conversation.pk).exchange("Hello?")

    finished = frames[-1]
    record = await the_record(conversation)
    assert record.status == expected
    assert record.http_status == status
    assert 'class="answer-error" role="alert"' in finished
    assert record.error_text and record.error_text in finished.replace("&#x27;", "'")
    assert f"badge-{expected}" in finished
    assert WORKERS_TOKEN not in finished


# --- stopping and disconnecting -------------------------------------------------------------


async def test_disconnecting_mid_stream_leaves_a_client_disconnected_record_and_hangs_up_upstream(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    socket = open_socket("owner", conversation.pk)
    await slow_turn_started(socket, fake_upstream)
    await socket.receive()  # the first word
    await socket.receive()  # the second word

    await socket.disconnect()  # returns once the consumer finished, record written

    record = await the_record(conversation)
    assert record.status == UsageStatus.CLIENT_DISCONNECTED
    assert record.error_code == ""  # nobody pressed Stop
    assert record.usage_source == UsageSource.ESTIMATED
    assert record.prompt_tokens > 0
    assert 0 < record.completion_tokens < 30
    answer = await Message.objects.aget(conversation=conversation, role=MessageRole.ASSISTANT)
    assert answer.content.startswith("word0 word1")
    assert answer.usage_record_id == record.pk
    upstream = await fake_upstream.wait_ended(0)
    assert upstream.disconnected


async def test_stop_cancels_the_upstream_request_shows_the_partial_answer_and_keeps_the_socket(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    socket = open_socket("owner", conversation.pk)
    await slow_turn_started(socket, fake_upstream)
    await socket.receive()

    await socket.send(action="stop")
    stopped = (await socket.receive_until(FINISHED))[-1]

    assert ">Stopped</span>" in stopped
    assert "client disconnected" not in stopped
    assert "word0" in stopped
    assert "estimated" in stopped
    record = await the_record(conversation)
    assert record.status == UsageStatus.CLIENT_DISCONNECTED
    assert record.error_code == STOPPED_BY_USER
    assert record.completion_tokens > 0
    assert (await fake_upstream.wait_ended(0)).disconnected

    await socket.send(action="send", message="Again, quickly")  # the socket still works
    again = await socket.receive_until(FINISHED)
    await socket.disconnect()
    assert "Hello from the fake upstream." in again[-1]


async def test_only_one_turn_runs_at_a_time_per_socket(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    socket = open_socket("owner", conversation.pk)
    await slow_turn_started(socket, fake_upstream, "First")

    await socket.send(action="send", message="Second")
    frames = await socket.receive_until('id="chat-notice"')
    await socket.disconnect()

    assert "still streaming" in frames[-1]
    assert len(fake_upstream.requests) == 1
    assert await Message.objects.filter(conversation=conversation, role=MessageRole.USER).acount() == 1


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw", ["{not json", "[1, 2]", '{"action": "dance"}', '{"message": 42}', '{"message": "hi \\ud800"}']
)
async def test_bad_input_gets_an_error_fragment_and_the_socket_stays_open(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream, raw: str
) -> None:
    socket = open_socket("owner", conversation.pk)
    await socket.connect()

    await socket.send_raw(raw)
    notice = await socket.receive()
    assert 'id="chat-notice"' in notice
    assert 'role="alert"' in notice

    await socket.send(action="send", message="Now properly")
    frames = await socket.receive_until(FINISHED)
    await socket.disconnect()
    assert "Hello from the fake upstream." in frames[-1]


async def test_an_empty_message_is_refused_with_a_notice(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    socket = open_socket("owner", conversation.pk)
    await socket.connect()

    await socket.send(action="send", message="   ")
    notice = await socket.receive()
    await socket.disconnect()

    assert "Type a message first." in notice
    assert fake_upstream.requests == []


# --- who may connect and send ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("who", "whose"),
    [("outsider", "conversation"), (None, "conversation"), ("owner", "other_conversation")],
    ids=["an outsider", "an anonymous visitor", "the owner on another team's conversation"],
)
async def test_a_socket_to_a_conversation_outside_ones_teams_is_refused_at_connect(
    open_socket: OpenSocket,
    conversation: Conversation,
    other_conversation: Conversation,
    who: str | None,
    whose: str,
) -> None:
    target = conversation if whose == "conversation" else other_conversation
    socket = open_socket(who, target.pk)
    connected, _ = await socket.connect()
    assert not connected


async def test_a_teammate_can_chat_in_the_teams_conversation(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    frames = await open_socket("teammate", conversation.pk).exchange("Hi from a teammate")

    assert "Hello from the fake upstream." in frames[-1]


@pytest.mark.parametrize("demote", [False, True], ids=["a viewer", "a teammate demoted while connected"])
async def test_a_viewer_may_connect_but_sending_is_refused_with_a_clear_error(
    open_socket: OpenSocket,
    actors: Actors,
    conversation: Conversation,
    fake_upstream: FakeUpstream,
    demote: bool,
) -> None:
    socket = open_socket("teammate" if demote else "viewer", conversation.pk)
    assert (await socket.connect())[0]
    if demote:
        await Membership.objects.filter(user=actors.teammate, team=actors.team).aupdate(role=Role.VIEWER)

    await socket.send(action="send", message="May I?")
    notice = await socket.receive()
    await socket.disconnect()

    assert "Viewers can read this team" in notice
    assert fake_upstream.requests == []
    assert not await Message.objects.filter(conversation=conversation).aexists()


async def test_leaving_the_team_closes_an_open_socket(
    open_socket: OpenSocket, actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    socket = open_socket("teammate", conversation.pk)
    await socket.connect()
    await Membership.objects.filter(user=actors.teammate, team=actors.team).adelete()

    await socket.send(action="send", message="Still here?")
    notice = await socket.receive()
    closed = await socket.communicator.receive_output(timeout=5)

    assert "no longer available" in notice
    assert closed["type"] == "websocket.close"
    assert fake_upstream.requests == []


async def test_a_turn_that_breaks_before_its_answer_is_stored_does_not_leave_the_page_streaming(
    open_socket: OpenSocket,
    conversation: Conversation,
    fake_upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(self: object, record: UsageRecord | None, outcome: object) -> None:
        raise RuntimeError("database went away")

    monkeypatch.setattr("playground.chat.services.turns.ChatTurn._save_answer", broken)
    socket = open_socket("owner", conversation.pk)
    await socket.connect()

    await socket.send(action="send", message="Hello?")
    frames = await socket.receive_until("Something went wrong")
    await socket.disconnect()

    assert 'data-state="idle"' in frames[-1]
    assert 'role="alert"' in frames[-1]


class UnreachableLayer:
    """A channel layer that cannot be reached (as a Redis read timeout would be)."""

    def __init__(self, **kwargs: object) -> None:
        raise ConnectionError("the channel layer is down")


async def test_chat_does_not_depend_on_the_channel_layer(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream, settings: LazySettings
) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": f"{__name__}.UnreachableLayer"}}
    frames = await open_socket("owner", conversation.pk).exchange("Hello?")

    assert "Hello from the fake upstream." in frames[-1]
