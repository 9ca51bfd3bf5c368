"""Alerts beyond e-mail (issue 41): destinations checked like connections, deliveries signed and
retried with backoff against real loopback receivers, and each rule raising its occurrence once."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from playground.accounts.models import Membership
from playground.alerts import delivery as delivery_module
from playground.alerts.delivery import delivery_attempt
from playground.alerts.destinations import destination_create
from playground.alerts.evaluation import alerts_evaluate
from playground.alerts.events import alert_raise
from playground.alerts.models import (
    AlertDelivery,
    AlertDestination,
    AlertEvent,
    AlertKind,
    DeliveryStatus,
    DestinationKind,
)
from playground.catalog.seed import ENGINE_MODEL_ID
from playground.providers.http import TimeoutPolicy
from playground.providers.models import ProviderConnection
from playground.usage.calls.context import RequestContext
from playground.usage.models import UsageStatus
from tests.fakes.upstream import FakeUpstream, error, hang, redirect
from tests.support.actors import Actors
from tests.support.analytics import engine_priced_as_its_own_card, record_write
from tests.support.clients import client_for

SECRET = "a-signing-secret-of-32-characters"
ALL_KINDS = [kind.value for kind in AlertKind if kind != AlertKind.TEST]
OnCommit = Callable[..., Any]


def owner_of(actors: Actors) -> Membership:
    return Membership.objects.get(team=actors.team, user=actors.owner)


def add(
    actors: Actors, upstream: FakeUpstream, kind: str = DestinationKind.WEBHOOK, **more: Any
) -> AlertDestination:
    return destination_create(
        actor=owner_of(actors),
        name=more.pop("name", f"{kind} receiver"),
        kind=kind,
        url=upstream.url + "/hook",
        signing_secret=SECRET,
        kinds=more.pop("kinds", ALL_KINDS),
    )


def raise_one(actors: Actors, key: str = "k1") -> AlertEvent | None:
    return alert_raise(
        team_id=actors.team.pk,
        kind=AlertKind.CONNECTION,
        key=key,
        title="Connection Workers AI is failing",
        summary="5 requests failed in the last 10 minutes.",
        details={"failures": 5},
    )


@pytest.mark.django_db
def test_a_webhook_gets_the_event_signed_over_the_bytes_it_received_and_the_delivery_is_logged(
    actors: Actors, fake_upstream: FakeUpstream, django_capture_on_commit_callbacks: OnCommit
) -> None:
    destination = add(actors, fake_upstream)

    with django_capture_on_commit_callbacks(execute=True):
        event = raise_one(actors)

    assert event is not None
    received = fake_upstream.requests[-1]
    assert received.path == "/hook" and received.json["kind"] == "connection_failing"
    assert received.json["summary"] == "5 requests failed in the last 10 minutes."
    stamp, mac = dict(
        part.split("=", 1) for part in received.headers["x-playground-signature"].split(",")
    ).values()
    expected = hmac.new(SECRET.encode(), f"{stamp}.".encode() + received.raw, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(mac, expected)
    assert abs(int(stamp) - time.time()) < 60
    assert received.headers["x-playground-event"] == "connection_failing"
    delivery = AlertDelivery.objects.get(destination=destination)
    assert (delivery.status, delivery.attempts, delivery.response_status) == (DeliveryStatus.SENT, 1, 200)
    assert raise_one(actors) is None  # the same occurrence is raised once
    assert AlertDelivery.objects.count() == 1


@pytest.mark.django_db
def test_slack_and_teams_get_their_own_formats_and_only_the_kinds_they_chose(
    actors: Actors, fake_upstream: FakeUpstream, django_capture_on_commit_callbacks: OnCommit
) -> None:
    add(actors, fake_upstream, DestinationKind.SLACK)
    add(actors, fake_upstream, DestinationKind.TEAMS)
    add(actors, fake_upstream, name="budget only", kinds=[AlertKind.BUDGET])

    with django_capture_on_commit_callbacks(execute=True):
        raise_one(actors)

    bodies = [request.json for request in fake_upstream.requests]
    assert len(bodies) == 2  # the budget-only webhook was not told
    slack = next(body for body in bodies if "text" in body)
    assert slack == {"text": "*Connection Workers AI is failing*\n5 requests failed in the last 10 minutes."}
    teams = next(body for body in bodies if "attachments" in body)
    card = teams["attachments"][0]
    assert card["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert [block["text"] for block in card["content"]["body"]] == [
        "Connection Workers AI is failing",
        "5 requests failed in the last 10 minutes.",
    ]


@pytest.mark.django_db
def test_a_failing_destination_is_retried_with_backoff_then_given_up_and_says_why(
    actors: Actors, fake_upstream: FakeUpstream
) -> None:
    add(actors, fake_upstream)
    raise_one(actors)  # on_commit never runs here: the attempts are made one by one below
    delivery = AlertDelivery.objects.get()
    fake_upstream.script(*[error(500)] * 5)

    waits = [delivery_attempt(delivery.pk) for _ in range(5)]

    assert waits == [30.0, 60.0, 120.0, 240.0, None]
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_status) == (DeliveryStatus.FAILED, 5, 500)
    assert "500" in delivery.last_error
    assert delivery_attempt(delivery.pk) is None and len(fake_upstream.requests) == 5  # given up: no sixth


@pytest.mark.django_db
def test_a_hanging_destination_times_out_and_a_redirect_is_not_followed(
    actors: Actors, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delivery_module, "TIMEOUTS", TimeoutPolicy(connect=1.0, first_byte=0.5, total=1.0))
    add(actors, fake_upstream)
    raise_one(actors)
    delivery = AlertDelivery.objects.get()
    fake_upstream.script(hang(5), redirect("http://127.0.0.1:9/elsewhere"))

    started = time.monotonic()
    assert delivery_attempt(delivery.pk) == 30.0
    assert time.monotonic() - started < 3
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.PENDING and delivery.last_error

    assert delivery_attempt(delivery.pk) == 60.0
    delivery.refresh_from_db()
    assert delivery.response_status == 302 and len(fake_upstream.requests) == 2  # not followed


@pytest.mark.django_db
def test_destinations_pass_the_outbound_checks_and_need_a_secret_for_webhooks(
    actors: Actors, fake_upstream: FakeUpstream
) -> None:
    owner = owner_of(actors)

    def refused(url: str, kind: str = DestinationKind.SLACK, secret: str = "") -> dict[str, list[str]]:
        with pytest.raises(ValidationError) as caught:
            destination_create(
                actor=owner, name="x", kind=kind, url=url, signing_secret=secret, kinds=ALL_KINDS
            )
        return caught.value.message_dict

    assert "internal address" in refused("https://10.1.2.3/hook")["url"][0]
    assert "internal address" in refused("https://169.254.169.254/latest")["url"][0]
    assert "https://" in refused("http://93.184.216.34/hook")["url"][0]
    assert (
        "signing secret"
        in refused(fake_upstream.url + "/hook", DestinationKind.WEBHOOK, "short")["signing_secret"][0]
    )
    slack = add(actors, fake_upstream, DestinationKind.SLACK)
    assert fake_upstream.url not in slack.url_encrypted  # the URL (a Slack secret) is stored encrypted


@pytest.mark.django_db
def test_the_rules_raise_a_failing_connection_and_a_spend_anomaly_once(
    actors: Actors, fake_upstream: FakeUpstream, workers_connection: ProviderConnection
) -> None:
    engine_priced_as_its_own_card()
    add(actors, fake_upstream)
    now = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)
    context = RequestContext(
        team_id=actors.team.pk,
        user_id=actors.owner.pk,
        connection_id=workers_connection.pk,
        model_id=ENGINE_MODEL_ID,
    )
    for minute in range(5):
        record_write(now - dt.timedelta(minutes=minute + 1), context, prompt=10, cached=None, out=0, ttft=0,
                     latency=10, status=UsageStatus.UPSTREAM_ERROR)  # fmt: skip
    for days_ago in range(1, 8):  # a usual day: 100k prompt tokens, then today: 10 times that
        record_write(
            now - dt.timedelta(days=days_ago), context, prompt=100_000, cached=0, out=0, ttft=10, latency=10
        )
    record_write(now - dt.timedelta(hours=1), context, prompt=1_000_000, cached=0, out=0, ttft=10, latency=10)

    assert alerts_evaluate(now=now) == 2
    kinds = sorted(AlertEvent.objects.values_list("kind", flat=True))
    assert kinds == [AlertKind.CONNECTION, AlertKind.SPEND]
    failing = AlertEvent.objects.get(kind=AlertKind.CONNECTION)
    assert failing.details == {"connection": workers_connection.pk, "failures": 5}
    assert "Workers AI (fake)" in failing.title
    assert alerts_evaluate(now=now + dt.timedelta(minutes=1)) == 0  # the same window, the same day
    assert AlertDelivery.objects.count() == 2


@pytest.mark.django_db
def test_the_alerts_page_adds_a_destination_sends_a_test_and_is_scoped_to_the_team(
    actors: Actors, fake_upstream: FakeUpstream, django_capture_on_commit_callbacks: OnCommit
) -> None:
    url = reverse("teams:alerts", args=[actors.team.pk])
    owner = client_for(actors.owner)

    added = owner.post(
        url,
        {
            "name": "#oncall",
            "kind": "webhook",
            "url": fake_upstream.url + "/hook",
            "signing_secret": SECRET,
            "kinds": ALL_KINDS,
        },
    )
    assert added.status_code == 302
    destination = AlertDestination.objects.get(team=actors.team)
    with django_capture_on_commit_callbacks(execute=True):
        owner.post(reverse("teams:alert-test", args=[actors.team.pk, destination.pk]))
    assert fake_upstream.requests[-1].json["kind"] == "test"
    page = owner.get(url).content.decode()
    assert "#oncall" in page and "Test alert for #oncall" in page and "Sent" in page

    bad = owner.post(url, {"name": "x", "kind": "slack", "url": "https://10.0.0.1/", "kinds": ALL_KINDS})
    assert bad.status_code == 400 and "internal address" in bad.content.decode()
    assert client_for(actors.viewer).post(url, {"name": "y"}).status_code == 403
    outsider = client_for(actors.outsider)
    assert outsider.get(url).status_code == 404
    assert (
        outsider.post(reverse("teams:alert-test", args=[actors.team.pk, destination.pk])).status_code == 404
    )
    other = reverse("teams:alert-test", args=[actors.other_team.pk, destination.pk])
    assert outsider.post(other).status_code == 404  # its own team, someone else's destination
    delete = reverse("teams:alert-delete", args=[actors.team.pk, destination.pk])
    assert outsider.post(delete).status_code == 404
    assert owner.post(delete).status_code == 302 and not AlertDestination.objects.exists()
    assert owner.post(delete).status_code == 404  # gone
