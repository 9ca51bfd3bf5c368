"""The answers the idempotency store keeps for replay (issue 37): encrypted at rest, replayed
exactly within the window, and nothing of them left once it ends."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.conf import LazySettings
from django.utils import timezone

from playground.gateway.idempotency import (
    IDEMPOTENCY_TTL,
    Claim,
    Replay,
    idempotency_claim,
    idempotency_expire,
    idempotency_store,
)
from playground.gateway.models import IdempotentRequest
from playground.gateway.tasks import idempotency_answers_expire
from playground.providers.models import ProviderConnection
from tests.gateway.conftest import IssuedKey, issue
from tests.support.actors import Actors

pytestmark = pytest.mark.django_db

PLANTED = "refund code PLANTED-7731-ZEBRA for jane.doe@example.com"
ANSWER = ('{"choices":[{"message":{"role":"assistant","content":"' + PLANTED + '"}}]}').encode()
HEADERS = {"content-type": "application/json", "x-playground-request-id": "req-1"}


@pytest.fixture
def key(actors: Actors, workers_connection: ProviderConnection) -> IssuedKey:
    return issue(actors, workers_connection)


def _answered(key: IssuedKey, name: str = "order-1") -> Claim:
    claim = idempotency_claim(api_key=key.key, key=name, digest="d" * 64)
    assert isinstance(claim, Claim)
    idempotency_store(claim, status=200, headers=HEADERS, body=ANSWER)
    return claim


def test_the_stored_answer_is_encrypted_and_replayed_exactly(key: IssuedKey) -> None:
    _answered(key)

    stored = bytes(IdempotentRequest.objects.get().body or b"")
    assert stored and PLANTED.encode() not in stored and b"PLANTED" not in stored
    assert b"jane.doe" not in stored

    replay = idempotency_claim(api_key=key.key, key="order-1", digest="d" * 64)
    assert isinstance(replay, Replay)
    assert (replay.status, replay.headers, replay.body) == (200, HEADERS, ANSWER)


def test_after_the_window_nothing_of_the_answer_is_left(key: IssuedKey) -> None:
    _answered(key, "order-1")
    later = timezone.now() + dt.timedelta(hours=1)
    with time_machine.travel(later, tick=False):
        _answered(key, "order-2")  # an hour younger: still in its window when the first's ends

    first_window_end = later - dt.timedelta(hours=1) + IDEMPOTENCY_TTL
    with time_machine.travel(first_window_end + dt.timedelta(seconds=1), tick=False):
        assert idempotency_expire() == 1
        assert list(IdempotentRequest.objects.values_list("key", flat=True)) == ["order-2"]
        again = idempotency_claim(api_key=key.key, key="order-1", digest="d" * 64)
    assert isinstance(again, Claim)  # the repeat is a first request again: sent, not replayed

    with time_machine.travel(later + IDEMPOTENCY_TTL + dt.timedelta(seconds=1), tick=False):
        assert idempotency_expire() == 1
    # Left: only the new claim of order-1, in flight, with no answer yet.
    assert list(IdempotentRequest.objects.values_list("key", "body")) == [("order-1", None)]


def test_an_answer_no_key_opens_is_given_up_and_the_request_sent_again(
    key: IssuedKey, settings: LazySettings
) -> None:
    _answered(key)
    settings.FIELD_ENCRYPTION_KEY = "a-new-key-without-the-previous-one"
    settings.FIELD_ENCRYPTION_KEY_PREVIOUS = ()

    again = idempotency_claim(api_key=key.key, key="order-1", digest="d" * 64)

    assert isinstance(again, Claim)
    assert IdempotentRequest.objects.get().body is None


def test_the_beat_runs_the_sweep_every_five_minutes(key: IssuedKey, settings: LazySettings) -> None:
    schedule = {entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert schedule[idempotency_answers_expire.name] == 300.0  # seconds
    _answered(key)

    with time_machine.travel(timezone.now() + IDEMPOTENCY_TTL + dt.timedelta(minutes=1), tick=False):
        assert idempotency_answers_expire.apply().get() == 1
    assert not IdempotentRequest.objects.exists()
