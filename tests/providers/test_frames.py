"""Reading an event stream's bytes: `data:` payloads, whatever the reads cut."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from playground.providers.adapters.frames import sse_data
from tests.fakes.upstream import collect


async def reads(*chunks: bytes) -> AsyncGenerator[bytes]:
    for chunk in chunks:
        yield chunk


async def test_only_data_lines_with_a_payload_are_read_and_the_last_line_needs_no_line_end() -> None:
    payloads = await collect(
        sse_data(reads(b': keep-alive\n\nevent: x\ndata:\ndata:{"a"', b":1}\r\nid: 3\ndata:  [DONE]  "))
    )

    assert payloads == ['{"a":1}', "[DONE]"]


async def test_a_line_end_cut_between_reads_makes_no_payload_of_its_own() -> None:
    payloads = await collect(sse_data(reads(b"data: 1\r", b"\ndata: 2\r", b"\r", b"data: 3\n")))

    assert payloads == ["1", "2", "3"]


async def test_bytes_that_are_not_utf8_are_replaced_not_fatal() -> None:
    payloads = await collect(sse_data(reads(b'data: "caf\xe9"\n', b"data: \xf0\x9f", b"\x99\x82\n")))

    assert payloads == ['"caf\ufffd"', "\U0001f642"]


async def test_a_long_line_in_many_reads_is_one_payload() -> None:
    text = "x" * 300_000
    body = f'data: "{text}"\ndata: 2\n'.encode()
    pieces = [body[start : start + 1000] for start in range(0, len(body), 1000)]

    payloads = await collect(sse_data(reads(*pieces)))

    assert payloads == [f'"{text}"', "2"]
