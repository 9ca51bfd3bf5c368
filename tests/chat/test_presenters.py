"""Usage lines: what each answer shows under it."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from playground.accounts.models import Team
from playground.catalog.models import CatalogModel, PriceCard
from playground.chat.models import Conversation
from playground.chat.presenters.conversations import ago_text, composer_note, model_choices
from playground.chat.presenters.usage import cached_text, duration_text, usage_line
from playground.usage.metering import STOPPED_BY_USER
from playground.usage.models import UsageRecord, UsageSource, UsageStatus
from playground.usage.records import RECORD_WRITE_FAILED

CARD = PriceCard(
    input_per_m=Decimal("0.60"),
    cached_input_per_m=Decimal("0.10"),
    output_per_m=Decimal("3.00"),
    label="Priced as Kimi K2.5 ($0.60 / $0.10 / $3.00)",
)


def record(**overrides: object) -> UsageRecord:
    fields: dict[str, object] = {
        "status": UsageStatus.OK,
        "prompt_tokens": 1234,
        "cached_tokens": 1000,
        "completion_tokens": 56,
        "usage_source": UsageSource.PROVIDER,
        "price_card": CARD,
        "price_label": "Priced as Kimi K2.5 (retired on 2026-05-30; served as Kimi K2.6 since): …",
        "total_cost": Decimal("0.000123"),
        "ttft_ms": 120,
        "latency_ms": 1400,
    }
    fields.update(overrides)
    return UsageRecord(**fields)


def test_the_usage_line_reads_like_the_spec() -> None:
    line = usage_line(record())
    assert line.summary == "1,234 in · 1,000 cached (81%) · 56 out · $0.000123 · TTFT 120 ms · 1.4 s"
    assert line.price_label == record().price_label, "the label of the record's day, not the card's own"
    assert line.is_ok
    assert not line.estimated


def test_unreported_cached_tokens_show_a_dash_never_zero() -> None:
    line = usage_line(record(cached_tokens=None))
    assert line.cached == "— cached"
    assert "did not report" in line.cached_note


def test_cache_writes_are_shown_only_when_the_provider_reported_some() -> None:
    line = usage_line(record(prompt_tokens=5200, cached_tokens=1800, cache_write_tokens=3100))
    assert line.summary == (
        "5,200 in · 1,800 cached (35%) · 3,100 written to cache · 56 out · $0.000123 · TTFT 120 ms · 1.4 s"
    )
    assert usage_line(record(cache_write_tokens=None)).written == ""
    assert usage_line(record(cache_write_tokens=0)).written == ""


def test_zero_cached_tokens_are_shown_as_zero_when_reported() -> None:
    assert usage_line(record(cached_tokens=0)).cached == "0 cached (0%)"


def test_estimated_usage_is_flagged() -> None:
    line = usage_line(record(usage_source=UsageSource.ESTIMATED))
    assert line.estimated
    assert line.summary.endswith("(estimated)")
    assert line.estimated_note.startswith("The provider sent no usage")


def test_estimated_usage_says_when_the_providers_figures_were_absurd() -> None:
    line = usage_line(record(usage_source=UsageSource.ESTIMATED, usage_implausible=True))
    assert line.estimated_note.startswith("The provider's usage figures were absurd")


def test_a_minimal_record_says_its_figures_are_missing() -> None:
    text = "The full usage record could not be written (DataError): its tokens, cost and timings are missing."
    line = usage_line(
        record(usage_source=UsageSource.ESTIMATED, error_code=RECORD_WRITE_FAILED, error_text=text)
    )
    assert line.estimated_note == text


def test_an_unpriced_record_says_so_instead_of_zero_dollars() -> None:
    line = usage_line(record(price_card=None, total_cost=Decimal(0)))
    assert line.cost == "unpriced"
    assert "No price card" in line.price_label


def test_reasoning_tokens_are_shown_with_the_output() -> None:
    assert usage_line(record(reasoning_tokens=40)).tokens_out == "56 out (40 reasoning)"


def test_an_answer_the_user_stopped_reads_stopped() -> None:
    line = usage_line(
        record(status=UsageStatus.CLIENT_DISCONNECTED, error_code=STOPPED_BY_USER, ttft_ms=None)
    )
    assert line.status_label == "Stopped"
    assert not line.is_ok
    assert "TTFT" not in line.summary


def test_an_answer_cut_by_a_disconnect_says_the_client_went_away() -> None:
    line = usage_line(record(status=UsageStatus.CLIENT_DISCONNECTED, ttft_ms=None))
    assert line.status_label == "Stopped (client disconnected)"
    assert not line.is_ok


@pytest.mark.parametrize(("ms", "text"), [(0, "0 ms"), (999, "999 ms"), (1000, "1.0 s"), (1449, "1.4 s")])
def test_durations(ms: int, text: str) -> None:
    assert duration_text(ms) == text


def test_cached_share_is_of_the_prompt() -> None:
    assert cached_text(prompt_tokens=0, cached_tokens=0) == "0 cached"
    assert cached_text(prompt_tokens=200, cached_tokens=150) == "150 cached (75%)"


def test_model_choices_put_current_models_first_and_label_retired_ones() -> None:
    today = dt.date(2026, 11, 22)
    retired = CatalogModel(model_id="@cf/old", display_name="Aardvark", deprecated_on=dt.date(2026, 5, 30))
    current = CatalogModel(model_id="@cf/new", display_name="Zebra")

    choices = model_choices([retired, current], today=today)

    assert [choice.value for choice in choices] == ["@cf/new", "@cf/old"]
    assert choices[1].label == "Aardvark · retired on 2026-05-30"


def test_list_times_read_naturally() -> None:
    now = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)
    assert ago_text(now - dt.timedelta(seconds=20), now=now) == "just now"
    assert ago_text(now - dt.timedelta(hours=3, minutes=5), now=now) == "3\xa0hours ago"


def test_the_composer_note_says_why_the_composer_is_closed() -> None:
    team = Team(name="Alpha")
    connected = Conversation(team=team, connection_id=7)

    assert composer_note(connected, can_run=True) == ""
    assert composer_note(connected, can_run=False).startswith("You are a viewer in Alpha: you can read")
    assert "connection was deleted" in composer_note(Conversation(team=team), can_run=True)
