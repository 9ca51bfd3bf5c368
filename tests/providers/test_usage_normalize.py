from __future__ import annotations

import pytest

from playground.providers.usage_normalize import normalize_usage


def test_it_reads_the_openai_and_workers_ai_shape() -> None:
    usage = normalize_usage(
        {
            "prompt_tokens": 1386,
            "completion_tokens": 1306,
            "total_tokens": 2692,
            "prompt_tokens_details": {"cached_tokens": 1024},
            "completion_tokens_details": {"reasoning_tokens": 900},
        }
    )

    assert (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens, usage.reasoning_tokens) == (
        1386,
        1024,
        1306,
        900,
    )


def test_it_keeps_an_unreported_cache_figure_unknown_not_zero() -> None:
    usage = normalize_usage(
        {"prompt_tokens": 10, "completion_tokens": 50, "total_tokens": 60, "neurons": 3.1}
    )

    assert usage.cached_tokens is None
    assert usage.reasoning_tokens is None


def test_it_keeps_a_reported_zero_as_zero() -> None:
    usage = normalize_usage(
        {"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 0}}
    )

    assert usage.cached_tokens == 0


def test_it_adds_anthropic_cache_reads_and_writes_back_into_the_prompt() -> None:
    usage = normalize_usage(
        {
            "input_tokens": 100,
            "cache_read_input_tokens": 900,
            "cache_creation_input_tokens": 50,
            "output_tokens": 7,
        }
    )

    assert usage.prompt_tokens == 1050
    assert usage.cached_tokens == 900
    assert usage.cache_write_tokens == 50
    assert usage.completion_tokens == 7


def test_it_reads_litellms_cache_writes_beside_an_openai_prompt_that_includes_them() -> None:
    usage = normalize_usage(
        {
            "prompt_tokens": 3000,
            "completion_tokens": 40,
            "prompt_tokens_details": {"cached_tokens": 2000},
            "cache_read_input_tokens": 2000,
            "cache_creation_input_tokens": 600,
        }
    )

    assert (usage.prompt_tokens, usage.cached_tokens, usage.cache_write_tokens) == (3000, 2000, 600)


def test_it_reads_openrouters_cache_writes_in_the_prompt_details() -> None:
    usage = normalize_usage(
        {
            "prompt_tokens": 1200,
            "completion_tokens": 9,
            "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 1100},
        }
    )

    assert (usage.prompt_tokens, usage.cached_tokens, usage.cache_write_tokens) == (1200, 0, 1100)


def test_it_reads_moonshots_top_level_cached_tokens() -> None:
    usage = normalize_usage({"prompt_tokens": 500, "completion_tokens": 20, "cached_tokens": 384})

    assert usage.cached_tokens == 384


def test_it_adds_top_level_cache_write_tokens_to_an_anthropic_style_prompt() -> None:
    usage = normalize_usage({"input_tokens": 10, "cache_write_tokens": 90, "output_tokens": 1})

    assert usage.prompt_tokens == 100
    assert usage.cached_tokens is None
    assert usage.cache_write_tokens == 90


@pytest.mark.parametrize(
    "raw",
    [
        {"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 4}},
        {"input_tokens": 10, "cache_read_input_tokens": 4, "output_tokens": 5},
    ],
    ids=["Workers AI", "Anthropic style without writes"],
)
def test_a_provider_that_reports_no_cache_writes_leaves_them_unknown_not_zero(raw: dict[str, object]) -> None:
    assert normalize_usage(raw).cache_write_tokens is None


def test_it_keeps_a_reported_zero_cache_write_as_zero() -> None:
    usage = normalize_usage({"input_tokens": 10, "cache_creation_input_tokens": 0, "output_tokens": 1})

    assert usage.cache_write_tokens == 0


@pytest.mark.parametrize(
    ("raw", "cached", "written"),
    [
        ({"prompt_tokens": 10, "completion_tokens": 1, "cache_creation_input_tokens": 25}, None, 10),
        (
            {
                "prompt_tokens": 10,
                "completion_tokens": 1,
                "prompt_tokens_details": {"cached_tokens": 7, "cache_write_tokens": 7},
            },
            7,
            3,
        ),
    ],
    ids=["writes alone", "reads and writes"],
)
def test_it_never_reports_more_cached_and_written_tokens_than_prompt_tokens(
    raw: dict[str, object], cached: int | None, written: int
) -> None:
    usage = normalize_usage(raw)

    assert (usage.prompt_tokens, usage.cached_tokens, usage.cache_write_tokens) == (10, cached, written)


def test_an_absurd_cache_write_figure_flags_the_report() -> None:
    usage = normalize_usage({"input_tokens": 10, "cache_creation_input_tokens": -3, "output_tokens": 1})

    assert usage.implausible
    assert (usage.prompt_tokens, usage.cache_write_tokens) == (0, None)


@pytest.mark.parametrize(
    "raw",
    [
        {"prompt_tokens": 10, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 99}},
        {"prompt_tokens": 10, "completion_tokens": 1, "cached_tokens": 11},
    ],
)
def test_it_never_reports_more_cached_tokens_than_prompt_tokens(raw: dict[str, object]) -> None:
    assert normalize_usage(raw).cached_tokens == 10


def test_it_ignores_garbage_figures() -> None:
    usage = normalize_usage({"prompt_tokens": "12", "completion_tokens": True, "prompt_tokens_details": None})

    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (0, 0, None)
    assert usage.implausible


def test_it_keeps_the_raw_usage() -> None:
    raw = {"prompt_tokens": 3, "completion_tokens": 4, "neurons": 0.5}

    assert normalize_usage(raw).raw == raw


@pytest.mark.parametrize(
    "raw",
    [
        {"prompt_tokens": float("nan"), "completion_tokens": 1},
        {"prompt_tokens": float("inf"), "completion_tokens": 1},
        {"prompt_tokens": 10, "completion_tokens": 3_000_000_000},
        {"prompt_tokens": 10, "completion_tokens": 1e30},
        {"prompt_tokens": 10, "completion_tokens": -4},
        {"prompt_tokens": 10, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": "NaN"}},
        {"input_tokens": 2_000_000_000, "cache_read_input_tokens": 2_000_000_000, "output_tokens": 1},
    ],
    ids=["NaN", "Infinity", "above the column", "1e30", "negative", "a string", "a sum above the column"],
)
def test_it_flags_absurd_figures_instead_of_raising_or_passing_them_on(raw: dict[str, object]) -> None:
    usage = normalize_usage(raw)

    assert usage.implausible
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens, usage.reasoning_tokens) == (
        0,
        0,
        None,
        None,
    )


def test_it_does_not_flag_plausible_figures() -> None:
    assert not normalize_usage(
        {"prompt_tokens": 262_144, "completion_tokens": 0, "cached_tokens": None}
    ).implausible


@pytest.mark.parametrize("prompt", [float("nan"), 10], ids=["implausible", "plausible"])
def test_it_keeps_the_raw_usage_json_safe(prompt: float) -> None:
    raw = {"prompt_tokens": prompt, "neurons": float("-inf"), "note": "bad \ud800 \x00"}

    assert normalize_usage(raw).raw == {
        "prompt_tokens": "NaN" if prompt != 10 else 10,
        "neurons": "-Infinity",
        "note": "bad \ufffd \ufffd",
    }
