"""Tools in a real browser, under the strict CSP.

With the real engine: define a tool in the CodeMirror editor, get a call whose arguments
the engine constrained to the tool's schema (shown valid), type its result, press
Continue, and see the final answer, in words (the engine's default model is
instruction-tuned). Against the loopback fake Workers AI: two parallel calls; Continue with
one result missing is refused in the page (nothing sent), then with both the fake receives
the assistant's tool_calls and both tool messages with their ids.
Screenshots go to `test-artifacts/`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.conf import LazySettings
from playwright.sync_api import Page, expect

from playground.chat.models import Message, MessageRole
from tests.fakes.upstream import FakeUpstream, openai_chunk, sse, usage, usage_chunk
from tests.support.actors import Actors
from tests.support.browser import (
    Console,
    LiveApp,
    browser_page,
    drawer_open,
    engine_chat,
    fake_workers_chat,
    log_in,
    open_chat,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ANSWER_TIMEOUT_MS = 120_000
FIRST_ID, SECOND_ID = "functions.get_weather:0", "functions.get_weather:1"  # Kimi's id shape
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
    "returns_json": True,
    "mocks": [{"temperature_c": 18, "sky": "clear"}],
}


def define_tools(page: Page, tools: list[dict[str, Any]], *, choice: str, parallel: bool) -> None:
    """Type the definitions into the CodeMirror editor and save the panel."""
    drawer_open(page, "#tools-panel")
    content = page.locator("#tools-panel .cm-content")
    expect(content).to_be_visible()
    content.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(json.dumps(tools, indent=2))  # no key events: no auto-closed brackets
    if choice not in ("auto", "none", "required"):  # a tool's name is offered once the tool is saved
        set_choice(page, choice="auto", parallel=parallel)
    set_choice(page, choice=choice, parallel=parallel)


def set_choice(page: Page, *, choice: str, parallel: bool) -> None:
    page.locator("#tools-choice").select_option(choice)
    switch = page.locator("#tools-parallel")
    if switch.is_checked() != parallel:
        page.locator("label[for=tools-parallel]").click()
    page.locator("#tools-save").click()
    expect(page.locator("#tools-panel .notice-ok")).to_be_visible()


def send(page: Page, text: str) -> None:
    box = page.get_by_label("Message")
    box.fill(text)
    box.press("Enter")


def test_a_tool_round_trip_on_the_real_engine(
    live_app: LiveApp,
    running_engine: Any,
    actors: Actors,
    settings: LazySettings,
    chromium_path: str,
    artifacts: Path,
) -> None:
    conversation = engine_chat(actors, settings, running_engine)
    # Greedy, as the Settings drawer sets it: at the engine's default temperature (1) a 135M model
    # shown a tool's JSON tends to answer in more JSON or code.
    conversation.parameters = {"temperature": 0}
    conversation.save(update_fields=["parameters"])
    console = Console()

    with browser_page(chromium_path, console=console) as page:
        log_in(page, live_app.url)
        open_chat(page, live_app.url, conversation)

        # A broken definition is refused with its path, and nothing is saved.
        drawer_open(page, "#tools-panel")
        page.locator("#tools-panel .cm-content").click()
        page.keyboard.insert_text(
            json.dumps([{"type": "function", "function": {"name": "x", "parameters": {"type": 5}}}])
        )
        page.locator("#tools-save").click()
        expect(page.locator("#tools-errors")).to_contain_text("$[0].function.parameters.type")
        page.screenshot(path=artifacts / "tools-01-refused-definition.png", full_page=True)
        expect(page.locator("#tools-summary")).to_have_text("none")  # nothing was saved
        page.locator("#tools-panel > summary").click()  # the swapped panel is open: close it

        define_tools(page, [WEATHER_TOOL], choice="get_weather", parallel=False)
        expect(page.locator("#tools-tokens")).to_contain_text("to every request (an estimate")
        page.screenshot(path=artifacts / "tools-02-saved-tools.png", full_page=True)
        page.locator("#tools-panel > summary").click()

        send(page, "What is the weather in Paris?")
        card = page.locator(".tool-call").first
        expect(card).to_be_visible(timeout=ANSWER_TIMEOUT_MS)
        expect(card.locator(".tool-call-name")).to_have_text("get_weather")
        expect(card.locator(".badge-valid")).to_have_text("valid arguments")
        arguments = json.loads(card.locator(".tool-call-args").inner_text())
        assert arguments["city"] in ("Paris", "Oslo")
        page.screenshot(path=artifacts / "tools-03-tool-call.png")

        # A result that is not JSON, for a tool that returns JSON: refused inline.
        result_box = card.locator("textarea")
        result_box.fill("sunny, I think")
        page.get_by_role("button", name="Continue").click()
        expect(card.locator(".field-error")).to_contain_text("not valid JSON")
        expect(card.locator(".tool-result")).to_have_count(0)  # nothing was saved

        # Let the model answer in text now, then continue with a JSON result.
        drawer_open(page, "#tools-panel")
        set_choice(page, choice="none", parallel=False)
        result_box.fill('{"temperature_c": 18, "sky": "clear"}')
        page.get_by_role("button", name="Continue").click()
        expect(card.locator(".tool-result")).to_contain_text('"temperature_c": 18')
        final = page.locator(".message-assistant").nth(1)
        expect(final.locator(".usage-line:not(.usage-pending)")).to_be_visible(timeout=ANSWER_TIMEOUT_MS)
        expect(final.locator(".bubble.markdown")).not_to_be_empty()
        page.screenshot(path=artifacts / "tools-04-final-answer.png", full_page=True)
        answer = final.locator(".bubble.markdown").inner_text()

    # The default model (instruction-tuned) answers in words, not with another call or the question.
    assert re.search(r"[A-Za-z]{2,}( [A-Za-z,.'°]+){3,}", answer), answer
    assert "get_weather" not in answer and "What is the weather in Paris?" not in answer, answer

    assert console.problems == []
    result = Message.objects.get(role=MessageRole.TOOL)  # the refused result saved nothing
    call = result.reply_to
    assert call is not None
    assert result.reply_to == call and result.tool_call_index == 0
    assert result.tool_call_id == call.tool_calls[0]["id"]
    assert call.tool_calls[0]["valid"] is True


def tool_call_frames() -> list[dict[str, Any]]:
    """Two parallel calls, their arguments split across deltas (as Kimi streams them)."""
    first = {"index": 0, "id": FIRST_ID, "type": "function"}
    second = {"index": 1, "id": SECOND_ID, "type": "function"}
    return [
        openai_chunk(tool_calls=[{**first, "function": {"name": "get_weather", "arguments": '{"ci'}}]),
        openai_chunk(tool_calls=[{"index": 0, "function": {"arguments": 'ty": "Paris"}'}}]),
        openai_chunk(tool_calls=[{**second, "function": {"name": "get_weather", "arguments": ""}}]),
        openai_chunk(tool_calls=[{"index": 1, "function": {"arguments": '{"city": "Oslo"}'}}]),
        openai_chunk(finish_reason="tool_calls"),
        usage_chunk(usage(120, 30)),
    ]


def test_two_parallel_calls_need_both_results_and_go_back_with_their_ids(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str, artifacts: Path
) -> None:
    conversation = fake_workers_chat(actors, fake_upstream)
    fake_upstream.script(sse(tool_call_frames()))
    console = Console()

    with browser_page(chromium_path, console=console) as page:
        log_in(page, live_app.url)
        open_chat(page, live_app.url, conversation)
        define_tools(page, [WEATHER_TOOL], choice="auto", parallel=True)
        page.locator("#tools-panel > summary").click()

        send(page, "Weather in Paris and Oslo?")
        cards = page.locator(".tool-call")
        expect(cards).to_have_count(2)
        expect(page.locator(".tool-call .badge-valid")).to_have_count(2)

        # Only the first result: refused for the second call, nothing saved or sent.
        cards.nth(0).locator("textarea").fill('{"temperature_c": 18}')
        page.get_by_role("button", name="Continue").click()
        expect(cards.nth(1).locator(".field-error")).to_contain_text("Type a result or pick a mock")
        page.screenshot(path=artifacts / "tools-05-parallel-refused.png", full_page=True)
        assert len(fake_upstream.requests) == 1

        cards.nth(1).locator("select").select_option("0")  # the saved mock
        page.get_by_role("button", name="Continue").click()
        final = page.locator(".message-assistant").nth(1)
        expect(final.locator(".usage-line:not(.usage-pending)")).to_be_visible()
        expect(final.locator(".bubble.markdown")).to_contain_text("fake upstream")
        expect(cards.nth(1).locator(".tool-result")).to_contain_text("clear")
        page.screenshot(path=artifacts / "tools-06-parallel-continued.png", full_page=True)

    assert console.problems == []
    assert len(fake_upstream.requests) == 2
    sent = fake_upstream.requests[1].json
    assert sent["tools"] == [{"type": "function", "function": WEATHER_TOOL["function"]}]  # no mocks upstream
    assistant, first, second = sent["messages"][-3:]
    assert assistant["role"] == "assistant"
    assert [call["id"] for call in assistant["tool_calls"]] == [FIRST_ID, SECOND_ID]
    assert [call["function"]["arguments"] for call in assistant["tool_calls"]] == [
        '{"city": "Paris"}',
        '{"city": "Oslo"}',
    ]
    assert first == {"role": "tool", "tool_call_id": FIRST_ID, "content": '{"temperature_c": 18}'}
    assert (second["role"], second["tool_call_id"]) == ("tool", SECOND_ID)
    assert json.loads(second["content"]) == WEATHER_TOOL["mocks"][0]  # jsonb may reorder the keys
