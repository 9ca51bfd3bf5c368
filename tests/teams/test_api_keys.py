"""Team API keys' services: who may create, change and revoke them, what they accept, what the
audit log keeps (never the secret), and a revoke the gateway sees on the key's next request."""

from __future__ import annotations

import datetime as dt
import hashlib
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from playground.accounts.models import AuditAction, AuditEvent, Role
from playground.gateway.admission import api_key_authenticate
from playground.gateway.errors import GatewayError
from playground.providers.models import ProviderConnection
from playground.providers.services import connection_models_store
from playground.teams.services.api_keys import (
    KeySettings,
    api_key_create,
    api_key_create_by_operator,
    api_key_revoke,
    api_key_update,
)
from playground.usage.models import ApiKey
from tests.support.actors import Actors

pytestmark = pytest.mark.django_db


def create(actors: Actors, connection: ProviderConnection, role: str = Role.OWNER, **options: Any) -> str:
    """Create a key as Alpha's person in `role`; its secret."""
    settings = KeySettings(name="billing-agent", connection_id=connection.pk, **options)
    _key, secret = api_key_create(actor=actors.membership(actors.in_role(role)), settings=settings)
    return secret


@pytest.mark.parametrize("role", [Role.OWNER, Role.ADMIN])
def test_owners_and_admins_create_a_key_whose_secret_is_stored_only_as_a_hash(
    actors: Actors, workers_connection: ProviderConnection, role: str
) -> None:
    secret = create(actors, workers_connection, role, monthly_budget_usd=Decimal("5"), requests_per_minute=60)

    key = ApiKey.objects.get()
    assert secret.startswith("pgk_") and len(secret) > 40
    assert key.secret_sha256 == hashlib.sha256(secret.encode()).hexdigest()
    assert key.prefix == secret[:10] and secret not in key.prefix
    assert key.created_by == actors.in_role(role) and key.connection == workers_connection
    assert (key.monthly_budget_usd, key.requests_per_minute, key.tokens_per_minute) == (Decimal(5), 60, None)
    assert api_key_authenticate(secret) == key


@pytest.mark.parametrize("role", [Role.MEMBER, Role.VIEWER])
def test_members_and_viewers_may_not_create_change_or_revoke_a_key(
    actors: Actors, workers_connection: ProviderConnection, role: str
) -> None:
    create(actors, workers_connection)
    key = ApiKey.objects.get()
    actor = actors.membership(actors.in_role(role))
    settings = KeySettings(name="mine", connection_id=workers_connection.pk)

    with pytest.raises(PermissionDenied):
        api_key_create(actor=actor, settings=settings)
    with pytest.raises(PermissionDenied):
        api_key_update(actor=actor, key_id=key.pk, settings=settings)
    with pytest.raises(PermissionDenied):
        api_key_revoke(actor=actor, key_id=key.pk)
    assert ApiKey.objects.get().name == "billing-agent" and key.revoked_at is None


def test_another_teams_connection_and_keys_are_out_of_reach(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    create(actors, workers_connection)
    alpha_key = ApiKey.objects.get()
    outsider = actors.outsider.memberships.get()  # owner of Bravo

    with pytest.raises(ValidationError) as refused:
        api_key_create(actor=outsider, settings=KeySettings(name="x", connection_id=workers_connection.pk))
    assert refused.value.message_dict == {"connection": ["Choose one of this team's connections."]}
    with pytest.raises(ValidationError, match="not one of this team's"):
        api_key_revoke(actor=outsider, key_id=alpha_key.pk)
    with pytest.raises(ValidationError, match="not one of this team's"):
        api_key_update(
            actor=outsider, key_id=alpha_key.pk, settings=KeySettings(name="x", connection_id=None)
        )
    assert ApiKey.objects.count() == 1
    alpha_key.refresh_from_db()
    assert alpha_key.revoked_at is None and alpha_key.name == "billing-agent"


def test_the_allow_list_holds_only_models_the_connection_serves(
    actors: Actors, openai_connection: ProviderConnection
) -> None:
    connection_models_store(connection=openai_connection, models=["served/a", "served/b"])

    with pytest.raises(ValidationError) as refused:
        create(actors, openai_connection, allowed_models=("served/a", "served/c", "served/d"))
    assert refused.value.message_dict["allowed_models"][0].startswith(
        "Gateway does not serve served/c, served/d: its last test listed served/a, served/b."
    )
    with pytest.raises(ValidationError) as malformed:
        create(actors, openai_connection, allowed_models=("served/a", "no spaces please"))
    assert "Not a model id: no spaces please." in malformed.value.message_dict["allowed_models"][0]
    assert not ApiKey.objects.exists()

    create(actors, openai_connection, allowed_models=("served/b", "served/a", "served/b"))
    assert ApiKey.objects.get().allowed_models == ["served/b", "served/a"]


def test_limits_budget_expiry_and_name_are_checked(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    create(actors, workers_connection)
    past = timezone.now() - dt.timedelta(minutes=1)

    with pytest.raises(ValidationError) as refused:
        create(
            actors,
            workers_connection,
            monthly_budget_usd=Decimal(-1),
            requests_per_minute=0,
            tokens_per_minute=0,
            expires_at=past,
        )

    assert set(refused.value.message_dict) == {
        "monthly_budget_usd",
        "requests_per_minute",
        "tokens_per_minute",
        "expires_at",
    }
    with pytest.raises(ValidationError) as taken:
        create(actors, workers_connection)  # the same name
    assert "already has a key with that name" in taken.value.message_dict["name"][0]


def test_each_change_is_audited_with_what_it_replaced_and_never_the_secret(
    actors: Actors, workers_connection: ProviderConnection, openai_connection: ProviderConnection
) -> None:
    secret = create(actors, workers_connection, Role.ADMIN, requests_per_minute=60)
    key = ApiKey.objects.get()
    expiry = dt.datetime(2099, 1, 31, 12, 0, tzinfo=dt.UTC)

    api_key_update(
        actor=actors.membership(actors.owner),
        key_id=key.pk,
        settings=KeySettings(
            name="billing-agent-2",
            connection_id=openai_connection.pk,
            monthly_budget_usd=Decimal("12.5"),
            requests_per_minute=60,
            expires_at=expiry,
        ),
    )
    api_key_update(  # nothing changed: nothing audited
        actor=actors.membership(actors.owner),
        key_id=key.pk,
        settings=KeySettings(
            name="billing-agent-2",
            connection_id=openai_connection.pk,
            monthly_budget_usd=Decimal("12.50"),
            requests_per_minute=60,
            expires_at=expiry,
        ),
    )
    api_key_revoke(actor=actors.membership(actors.owner), key_id=key.pk)

    events = list(AuditEvent.objects.order_by("id"))
    assert [(e.action, e.actor_name) for e in events] == [
        (AuditAction.API_KEY_CREATED, "admin"),
        (AuditAction.API_KEY_UPDATED, "owner"),
        (AuditAction.API_KEY_REVOKED, "owner"),
    ]
    assert events[0].target == f"billing-agent ({secret[:10]}…)"
    assert events[0].detail == {
        "name": "billing-agent",
        "prefix": secret[:10],
        "connection": "Workers AI (fake)",
        "allowed_models": "all of the connection's",
        "monthly_budget": None,
        "requests_per_minute": 60,
        "tokens_per_minute": None,
        "expires": None,
        "follows_routing_policy": False,
        "records_keep": "redacted",
    }
    assert events[1].detail == {
        "name": "billing-agent-2",
        "connection": "Gateway",
        "monthly_budget": "12.50",
        "expires": "2099-01-31 12:00 UTC",
        "previous": {
            "name": "billing-agent",
            "connection": "Workers AI (fake)",
            "monthly_budget": None,
            "expires": None,
        },
    }
    for event in events:
        assert secret not in str(event.detail) + event.target
        assert secret[10:20] not in str(event.detail) + event.target, "no part of the secret past its prefix"
        assert key.secret_sha256 not in str(event.detail)


def test_a_revoked_key_is_refused_on_its_next_request_and_stays_listed(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    secret = create(actors, workers_connection)
    key = api_key_authenticate(secret)  # usable

    api_key_revoke(actor=actors.membership(actors.admin), key_id=key.pk)

    with pytest.raises(GatewayError) as refused:
        api_key_authenticate(secret)
    assert refused.value.status == 401
    assert "revoked" in refused.value.message
    assert ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=False).exists()
    with pytest.raises(ValidationError, match="already revoked"):
        api_key_revoke(actor=actors.membership(actors.owner), key_id=key.pk)
    with pytest.raises(ValidationError, match="revoked key cannot be changed"):
        api_key_update(
            actor=actors.membership(actors.owner),
            key_id=key.pk,
            settings=KeySettings(name="again", connection_id=workers_connection.pk),
        )


def test_an_expired_key_may_be_given_a_later_expiry_but_not_a_past_one(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    secret = create(actors, workers_connection)
    key = ApiKey.objects.get()
    past = timezone.now() - dt.timedelta(days=1)
    ApiKey.objects.filter(pk=key.pk).update(expires_at=past)
    with pytest.raises(GatewayError, match="expired"):
        api_key_authenticate(secret)
    owner = actors.membership(actors.owner)

    renamed = api_key_update(  # its expiry unchanged (in the past) does not block another change
        actor=owner,
        key_id=key.pk,
        settings=KeySettings(name="renamed", connection_id=workers_connection.pk, expires_at=past),
    )
    assert renamed.name == "renamed"
    api_key_update(
        actor=owner,
        key_id=key.pk,
        settings=KeySettings(name="renamed", connection_id=workers_connection.pk, expires_at=None),
    )
    assert api_key_authenticate(secret).pk == key.pk


def test_the_operator_creates_a_key_without_a_creator_audited_as_manage_py(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    key, secret = api_key_create_by_operator(
        team=actors.team, settings=KeySettings(name="ci", connection_id=workers_connection.pk)
    )

    assert key.created_by is None and api_key_authenticate(secret) == key
    event = AuditEvent.objects.get()
    assert (event.action, event.actor, event.actor_name) == (AuditAction.API_KEY_CREATED, None, "manage.py")
