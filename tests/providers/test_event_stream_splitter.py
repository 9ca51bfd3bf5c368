"""The gateway's splitter: the same bytes and frames however the upstream's reads cut the stream."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from playground.providers.adapters.passthrough import EventStreamSplitter

CHUNK = {"id": "c1", "choices": [{"index": 0, "delta": {"content": "Hé ✓"}}]}
USAGE_ONLY = {"id": "c1", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}
STREAM = (
    f"data: {json.dumps(CHUNK, ensure_ascii=False)}\n\ndata: {json.dumps(USAGE_ONLY)}\r\n\r\ndata: [DONE]\n\n"
).encode()


def split(stream: bytes, size: int, *, drop_usage_only: bool) -> tuple[bytes, list[Mapping[str, Any]]]:
    """Feed `stream` in reads of `size` bytes; what was relayed and the frames read."""
    splitter = EventStreamSplitter(drop_usage_only=drop_usage_only)
    relayed, frames = b"", []
    for start in range(0, len(stream), size):
        out, found = splitter.feed(stream[start : start + size])
        relayed += out
        frames += found
    out, found = splitter.flush()
    return relayed + out, frames + found


@pytest.mark.parametrize("size", [1, 2, 7, 64, len(STREAM)])
def test_every_byte_is_relayed_and_every_frame_read_whatever_the_reads(size: int) -> None:
    relayed, frames = split(STREAM, size, drop_usage_only=False)

    assert relayed == STREAM
    assert frames == [CHUNK, USAGE_ONLY]


@pytest.mark.parametrize("size", [1, 3, len(STREAM)])
def test_the_usage_chunk_the_client_did_not_ask_for_is_read_but_not_relayed(size: int) -> None:
    relayed, frames = split(STREAM, size, drop_usage_only=True)

    assert relayed == STREAM.replace(f"data: {json.dumps(USAGE_ONLY)}\r\n\r\n".encode(), b"")
    assert frames == [CHUNK, USAGE_ONLY]


def test_a_long_line_in_many_reads_waits_for_its_end_and_goes_out_whole_once() -> None:
    line = f"data: {json.dumps({'choices': [{'delta': {'content': 'x' * 300_000}}]})}\n".encode()
    splitter = EventStreamSplitter(drop_usage_only=False)

    outputs = [splitter.feed(line[start : start + 1024]) for start in range(0, len(line), 1024)]

    assert all(out == (b"", []) for out in outputs[:-1])  # nothing before the line ends
    relayed, frames = outputs[-1]
    assert relayed == line
    assert frames[0]["choices"][0]["delta"]["content"] == "x" * 300_000
    assert splitter.flush() == (b"", [])


def test_a_last_line_without_its_newline_comes_out_when_the_stream_ends() -> None:
    splitter = EventStreamSplitter(drop_usage_only=False)

    assert splitter.feed(b'data: {"choices": []') == (b"", [])
    assert splitter.feed(b"}") == (b"", [])
    assert splitter.flush() == (b'data: {"choices": []}', [{"choices": []}])
