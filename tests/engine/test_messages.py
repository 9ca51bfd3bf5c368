"""OpenAI messages become plain template turns; Gemma gets its system prompt folded in."""

from __future__ import annotations

import pytest

from playground.engine.errors import EngineError
from playground.engine.messages import normalize_messages, render_tool_calls
from playground.engine.templates import GEMMA_CHAT_TEMPLATE, ChatTemplate, fold_system

MODEL = "@local/test"


def test_it_collects_system_messages_into_one_leading_turn() -> None:
    turns = normalize_messages(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
            {"role": "developer", "content": "Use French."},
        ],
        model_id=MODEL,
    )

    assert turns == [
        {"role": "system", "content": "Be brief.\n\nUse French."},
        {"role": "user", "content": "Hi"},
    ]


def test_it_renders_tool_calls_and_results_as_text_turns() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "clock", "arguments": '{"tz":"UTC"}'}}
    turns = normalize_messages(
        [
            {"role": "user", "content": "Time?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "12:00"},
        ],
        model_id=MODEL,
    )

    assert turns[1] == {"role": "assistant", "content": render_tool_calls([("clock", '{"tz":"UTC"}')])}
    assert turns[1]["content"] == '[{"name":"clock","arguments":{"tz":"UTC"}}]'
    assert turns[2] == {"role": "user", "content": "Result of clock (call 1):\n12:00"}


def test_a_tool_result_names_its_call_by_position_so_call_ids_do_not_change_the_prompt() -> None:
    def rendered(ids: tuple[str, str]) -> list[dict[str, str]]:
        calls = [
            {"id": ids[0], "type": "function", "function": {"name": "clock", "arguments": '{"tz":"UTC"}'}},
            {"id": ids[1], "type": "function", "function": {"name": "clock", "arguments": '{"tz":"CET"}'}},
        ]
        results = [{"role": "tool", "tool_call_id": ids[1], "content": "13:00"}]
        results.append({"role": "tool", "tool_call_id": ids[0], "content": "12:00"})
        assistant = {"role": "assistant", "content": None, "tool_calls": calls}
        return normalize_messages([{"role": "user", "content": "Time?"}, assistant, *results], model_id=MODEL)

    turns = rendered(("call_a1", "call_b2"))

    assert turns == rendered(("call_x9", "call_y8"))  # random ids, the same prompt
    assert turns[2]["content"] == "Result of clock (call 2):\n13:00\n\nResult of clock (call 1):\n12:00"


def test_it_merges_consecutive_turns_of_one_role() -> None:
    turns = normalize_messages(
        [{"role": "user", "content": "One"}, {"role": "user", "content": "Two"}], model_id=MODEL
    )

    assert turns == [{"role": "user", "content": "One\n\nTwo"}]


@pytest.mark.parametrize(
    ("part", "media"),
    [
        ({"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}, "images"),
        ({"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}, "audio"),
    ],
)
def test_it_refuses_media_parts_by_name(part: dict[str, object], media: str) -> None:
    with pytest.raises(EngineError) as caught:
        normalize_messages([{"role": "user", "content": [part]}], model_id=MODEL)

    assert caught.value.code == 8001
    assert f"does not accept {media}" in caught.value.message


def test_it_folds_the_system_prompt_into_the_first_user_turn() -> None:
    turns = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]

    assert fold_system(turns) == [{"role": "user", "content": "Be brief.\n\nHi"}]
    assert fold_system(turns[:1]) == [{"role": "user", "content": "Be brief."}]


def test_it_renders_gemma_turns_with_the_system_prompt_in_the_first_user_turn() -> None:
    template = ChatTemplate(GEMMA_CHAT_TEMPLATE, bos_token="<bos>", eos_token="<eos>")
    prompt = template.render(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "Bye"},
        ]
    )

    assert template.has_system_role is False
    assert prompt == (
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
        "<start_of_turn>model\nHello!<end_of_turn>\n"
        "<start_of_turn>user\nBye<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_it_keeps_the_system_role_for_templates_that_have_one() -> None:
    template = ChatTemplate(
        "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}",
        bos_token="",
        eos_token="",
    )

    assert template.has_system_role is True
    assert (
        template.render([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
        == "[system] S\n[user] U\n"
    )
