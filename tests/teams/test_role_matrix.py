"""Every team-page URL, as owner, admin, member, viewer and outsider.

The test walks the resolver's `teams` namespace: a route missing from MATRIX fails, so a
new page or action cannot ship without deciding who may use it. For each route and method
the roles listed may pass (anything but 403/404: a redirect, a page, a form error); every
other member gets 403; the outsider, who belongs to another team, gets 404 (the team and
its objects do not exist for them).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import URLPattern, URLResolver, get_resolver

from playground.accounts.models import ROLES_THAT_CAN_MANAGE, Invitation, Membership, Role
from playground.alerts.models import AlertDestination, AlertKind, DestinationKind
from playground.catalog.models import CatalogModel, PriceCard
from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.secrets import token_encrypt
from playground.providers.services import connection_save
from playground.teams.services.invitations import invitation_create
from playground.usage.api_keys import api_key_issue
from playground.usage.models import ApiKey
from tests.support.actors import Actors
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db

EVERYONE = frozenset(Role.values)
MANAGERS = frozenset(ROLES_THAT_CAN_MANAGE)
OWNERS = frozenset({Role.OWNER})
NOBODY: frozenset[str] = frozenset()  # superusers only (or no such method)
NOT_ALLOWED = None  # the method is refused (405) for everyone

# route name -> {method: roles that may use it}
MATRIX: dict[str, dict[str, frozenset[str] | None]] = {
    "members": {"GET": EVERYONE, "POST": NOT_ALLOWED},
    "invitation-create": {"GET": NOT_ALLOWED, "POST": MANAGERS},
    "invitation-revoke": {"GET": NOT_ALLOWED, "POST": MANAGERS},
    "member-role": {"GET": NOT_ALLOWED, "POST": MANAGERS},
    "member-remove": {"GET": NOT_ALLOWED, "POST": MANAGERS},
    "ownership-transfer": {"GET": NOT_ALLOWED, "POST": OWNERS},
    "leave": {"GET": NOT_ALLOWED, "POST": EVERYONE},
    "connections": {"GET": EVERYONE, "POST": NOT_ALLOWED},
    "connection-create": {"GET": MANAGERS, "POST": MANAGERS},
    "connection-edit": {"GET": MANAGERS, "POST": MANAGERS},
    "connection-delete": {"GET": NOT_ALLOWED, "POST": MANAGERS},
    "connection-test": {"GET": NOT_ALLOWED, "POST": MANAGERS},
    "catalogue": {"GET": EVERYONE, "POST": NOT_ALLOWED},
    "override-create": {"GET": NOT_ALLOWED, "POST": MANAGERS},
    "override-delete": {"GET": NOT_ALLOWED, "POST": MANAGERS},
    "card-create": {"GET": NOT_ALLOWED, "POST": NOBODY},
    "budgets": {"GET": EVERYONE, "POST": MANAGERS},
    "budget-unpriced": {"GET": NOT_ALLOWED, "POST": OWNERS},
    "member-budget": {"GET": NOT_ALLOWED, "POST": MANAGERS},
    "audit": {"GET": EVERYONE, "POST": NOT_ALLOWED},
    "api-keys": {"GET": EVERYONE, "POST": NOT_ALLOWED},
    "api-key-create": {"GET": MANAGERS, "POST": MANAGERS},
    "api-key-edit": {"GET": MANAGERS, "POST": MANAGERS},
    "api-key-revoke": {"GET": NOT_ALLOWED, "POST": MANAGERS},
    "routing": {"GET": EVERYONE, "POST": MANAGERS},
    "routing-dry-run": {"GET": NOT_ALLOWED, "POST": EVERYONE},  # a dry run changes nothing
    "routing-schema": {"GET": EVERYONE, "POST": NOT_ALLOWED},
    "data": {"GET": EVERYONE, "POST": OWNERS},
    "data-erase": {"GET": NOT_ALLOWED, "POST": OWNERS},  # its counting step changes nothing
    "data-retention": {"GET": NOT_ALLOWED, "POST": OWNERS},
    "alerts": {"GET": EVERYONE, "POST": MANAGERS},
    "alert-test": {"GET": NOT_ALLOWED, "POST": MANAGERS},
    "alert-delete": {"GET": NOT_ALLOWED, "POST": MANAGERS},
}
# Routes that are not about one team, and why.
NOT_TEAM_SCOPED = {
    "home": "redirects to the user's first team",
    "join": "an invitation link: anyone with it may open it (tests/teams/test_invitations.py)",
    "join-signup": "creates an account from an invitation link (tests/teams/test_invitations.py)",
}
ACTORS = [*Role.values, "outsider"]


def team_routes() -> dict[str, URLPattern]:
    resolver = get_resolver()
    teams = next(entry for entry in resolver.url_patterns if getattr(entry, "namespace", None) == "teams")
    assert isinstance(teams, URLResolver)
    routes: dict[str, URLPattern] = {}
    for pattern in teams.url_patterns:
        assert isinstance(pattern, URLPattern), "a nested include would hide its routes from this check"
        if pattern.name:
            routes[pattern.name] = pattern
    return routes


def test_every_team_route_has_a_decision() -> None:
    undecided = set(team_routes()) - set(MATRIX) - set(NOT_TEAM_SCOPED)
    assert not undecided, f"decide who may use {sorted(undecided)}: add them to MATRIX"
    assert set(MATRIX) | set(NOT_TEAM_SCOPED) <= set(team_routes()), "MATRIX names a route that is gone"


# --- objects each route acts on (fresh for every request: actions consume them) -------------------


def target_member(team: int) -> Membership:
    user = User.objects.create_user(f"target-{User.objects.count()}")
    return Membership.objects.create(team_id=team, user=user, role=Role.MEMBER)


def a_connection(team: int) -> ProviderConnection:
    count = ProviderConnection.objects.count()
    return connection_save(
        connection=ProviderConnection(
            team_id=team,
            name=f"Gateway {count}",
            kind=ConnectionKind.OPENAI_COMPATIBLE,
            base_url="http://127.0.0.1:9/v1",
        ),
        token="sk-test-token-0000",
    )


def an_api_key(team: int) -> ApiKey:
    key, _secret = api_key_issue(
        team_id=team,
        name=f"key {ApiKey.objects.count()}",
        connection_id=a_connection(team).pk,
        created_by_id=None,
    )
    return key


ALERT_RULES = {
    "connection_errors": "5",
    "connection_minutes": "10",
    "spend_factor": "3",
    "cache_drop_points": "20",
}


def a_destination(team: int) -> AlertDestination:
    """A destination as stored (its URL encrypted); the matrix only needs one to act on."""
    return AlertDestination.objects.create(
        team_id=team,
        name=f"Receiver {AlertDestination.objects.count()}",
        kind=DestinationKind.SLACK,
        url_encrypted=token_encrypt("https://hooks.example.com/services/T/B/x"),
        url_hint="https://hooks.example.com/…",
        kinds=[AlertKind.BUDGET],
    )


def an_invitation(actors: Actors) -> Invitation:
    return invitation_create(actor=actors.membership(actors.owner), role=Role.MEMBER)[0]


def an_override(team: int) -> PriceCard:
    model = CatalogModel.objects.order_by("pk").first()
    assert model is not None
    day = dt.date(2026, 1, 1) + dt.timedelta(days=PriceCard.objects.count())
    return PriceCard.objects.create(
        team_id=team, model=model, effective_from=day, input_per_m=1, output_per_m=2, label="override"
    )


def url_for(name: str, actors: Actors) -> tuple[str, dict[str, Any]]:
    """The URL of `name` for Alpha, and a valid POST body."""
    team = actors.team.pk
    model = CatalogModel.objects.order_by("pk").first()
    assert model is not None
    price = {
        "model": model.pk,
        "effective_from": "2027-01-01",
        "input_per_m": "1",
        "output_per_m": "2",
        "label": "x",
    }
    build: dict[str, Callable[[], tuple[str, dict[str, Any]]]] = {
        "members": lambda: (f"/teams/{team}/members/", {}),
        "invitation-create": lambda: (f"/teams/{team}/invitations/", {"role": "member"}),
        "invitation-revoke": lambda: (f"/teams/{team}/invitations/{an_invitation(actors).pk}/revoke/", {}),
        "member-role": lambda: (f"/teams/{team}/members/{target_member(team).pk}/role/", {"role": "viewer"}),
        "member-remove": lambda: (f"/teams/{team}/members/{target_member(team).pk}/remove/", {}),
        "ownership-transfer": lambda: (f"/teams/{team}/members/{target_member(team).pk}/make-owner/", {}),
        "leave": lambda: (f"/teams/{team}/leave/", {}),
        "connections": lambda: (f"/teams/{team}/connections/", {}),
        "connection-create": lambda: (
            f"/teams/{team}/connections/new/?kind=openai-compatible",
            {
                "kind": "openai-compatible",
                "name": f"New {ProviderConnection.objects.count()}",
                "base_url": "http://127.0.0.1:9/v1",
            },
        ),
        "connection-edit": lambda: (
            f"/teams/{team}/connections/{a_connection(team).pk}/",
            {"name": "Renamed"},
        ),
        "connection-delete": lambda: (f"/teams/{team}/connections/{a_connection(team).pk}/delete/", {}),
        "connection-test": lambda: (f"/teams/{team}/connections/{a_connection(team).pk}/test/", {}),
        "catalogue": lambda: (f"/teams/{team}/catalogue/", {}),
        "override-create": lambda: (f"/teams/{team}/catalogue/overrides/", price),
        "override-delete": lambda: (f"/teams/{team}/catalogue/overrides/{an_override(team).pk}/delete/", {}),
        "card-create": lambda: (f"/teams/{team}/catalogue/cards/", price),
        "budgets": lambda: (
            f"/teams/{team}/budgets/",
            {"monthly_limit_usd": "10", "alert_thresholds": "50, 80", "time_zone": "UTC"},
        ),
        "member-budget": lambda: (
            f"/teams/{team}/budgets/members/{target_member(team).pk}/",
            {"monthly_budget_usd": "5"},
        ),
        "budget-unpriced": lambda: (f"/teams/{team}/budgets/unpriced/", {"allow_unpriced": "on"}),
        "audit": lambda: (f"/teams/{team}/audit/", {}),
        "api-keys": lambda: (f"/teams/{team}/api-keys/", {}),
        "api-key-create": lambda: (
            f"/teams/{team}/api-keys/new/",
            {"name": f"new {ApiKey.objects.count()}", "connection": a_connection(team).pk},
        ),
        "api-key-edit": lambda: (
            f"/teams/{team}/api-keys/{an_api_key(team).pk}/",
            {"name": f"renamed {ApiKey.objects.count()}", "connection": a_connection(team).pk},
        ),
        "api-key-revoke": lambda: (f"/teams/{team}/api-keys/{an_api_key(team).pk}/revoke/", {}),
        "routing": lambda: (f"/teams/{team}/routing/", {"action": "document", "document": '{"rules": []}'}),
        "routing-dry-run": lambda: (
            f"/teams/{team}/routing/dry-run/",
            {"model": "m", "prompt_tokens": "1", "completion_tokens": "1"},
        ),
        "routing-schema": lambda: (f"/teams/{team}/routing/schema.json", {}),
        "data": lambda: (f"/teams/{team}/data/", {"store_mode": "redacted"}),
        "data-erase": lambda: (f"/teams/{team}/data/erase-end-user/", {"end_user": "cust-4711"}),
        "data-retention": lambda: (f"/teams/{team}/data/retention/", {"body_days": "30", "record_days": ""}),
        "alerts": lambda: (f"/teams/{team}/alerts/", {"form": "rules", **ALERT_RULES}),
        "alert-test": lambda: (f"/teams/{team}/alerts/{a_destination(team).pk}/test/", {}),
        "alert-delete": lambda: (f"/teams/{team}/alerts/{a_destination(team).pk}/delete/", {}),
    }
    return build[name]()


@pytest.mark.parametrize("name", sorted(MATRIX))
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_each_role_gets_the_decided_answer(actors: Actors, name: str, method: str, settings: Any) -> None:
    settings.PROVIDER_HOST_ALLOWLIST = ["127.0.0.1"]
    allowed = MATRIX[name][method]
    for actor in ACTORS:
        user = actors.outsider if actor == "outsider" else actors.in_role(actor)
        if actor != "outsider":  # a previous actor may have left or changed roles
            Membership.objects.update_or_create(team=actors.team, user=user, defaults={"role": actor})
        path, body = url_for(name, actors)
        client = client_for(user)
        response = client.get(path) if method == "GET" else client.post(path, body)
        status = response.status_code
        who = f"{method} {name} as {actor}"
        if allowed is NOT_ALLOWED:
            assert status in (405, 404), f"{who}: {status}"
            if actor == "outsider":
                assert status == 404 or status == 405, who
        elif actor == "outsider":
            assert status == 404, f"{who}: {status} (another team's page must not exist for them)"
        elif actor in allowed:
            assert status not in (403, 404, 405), f"{who}: {status}"
        else:
            assert status == 403, f"{who}: {status}"


def test_a_superuser_adds_a_global_card_from_the_catalogue(actors: Actors) -> None:
    actors.owner.is_superuser = True
    actors.owner.save()
    path, body = url_for("card-create", actors)

    response = client_for(actors.owner).post(path, body)

    assert response.status_code == 302
    assert PriceCard.objects.filter(
        team__isnull=True, effective_from=dt.date(2027, 1, 1), input_per_m=Decimal(1)
    ).exists()
