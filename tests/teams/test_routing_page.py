"""The Routing page: the policy in force, saved only when valid (problems at their paths, the
text kept), the form for common rules, versions with their diffs, the dry run, the schema."""

from __future__ import annotations

import json

import pytest

from playground.providers.models import ProviderConnection
from playground.routing.models import RoutingPolicy
from playground.routing.schema import POLICY_SCHEMA
from playground.usage.models import ApiKey
from tests.support.actors import Actors
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db
KIMI = "@cf/moonshotai/kimi-k2.5"
CHEAP = "@cf/openai/gpt-oss-20b"


def page(actors: Actors) -> str:
    return f"/teams/{actors.team.pk}/routing/"


def policy_text(connection: str = "Workers AI (fake)") -> str:
    return json.dumps(
        {
            "rules": [{"name": "main", "targets": [{"connection": connection, "model": KIMI}]}],
            "sticky_sessions": True,
        }
    )


def test_a_valid_policy_is_saved_as_a_version_and_an_invalid_one_is_refused_at_its_paths(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    client = client_for(actors.admin)
    saved = client.post(page(actors), {"action": "document", "document": policy_text(), "note": "first"})
    assert saved.status_code == 302
    rules = '"rules": [{"name": "x", "targets": [{"connection": "Gone", "model": "m"}]}]'
    broken = "{" + rules + ', "retries": {"attempts": 0}}'

    refused = client.post(page(actors), {"action": "document", "document": broken})

    text = refused.content.decode()
    assert refused.status_code == 400
    assert "Not saved: 1 problem." in text and "Version 1 stays in force." in text
    assert "$.retries.attempts" in text
    assert "{&quot;name&quot;: &quot;x&quot;" in text  # what was typed is still in the editor
    assert RoutingPolicy.objects.filter(team=actors.team).count() == 1
    again = client.post(
        page(actors), {"action": "document", "document": broken.replace(', "retries": {"attempts": 0}', "")}
    )
    assert "$.rules[0].targets[0].connection" in again.content.decode()


def test_the_forms_add_rules_and_the_versions_show_what_changed(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    client = client_for(actors.owner)
    client.post(page(actors), {"action": "document", "document": policy_text()})
    added = client.post(
        page(actors),
        {
            "action": "downgrade",
            "downgrade-name": "late-month",
            "downgrade-tag": "non-critical",
            "downgrade-percent": "80",
            "downgrade-target_connection": "Workers AI (fake)",
            "downgrade-target_model": CHEAP,
        },
    )
    assert added.status_code == 302
    latest = RoutingPolicy.objects.filter(team=actors.team).first()
    assert latest is not None and latest.version == 2
    assert latest.document["rules"][1] == {
        "name": "late-month",
        "when": {"tags_any": ["non-critical"], "budget_used_above": 0.8},
        "targets": [{"connection": "Workers AI (fake)", "model": CHEAP}],
    }
    text = client.get(page(actors)).content.decode()
    assert "Version 2 in force" in text and "What changed from v1" in text
    assert "+       &quot;name&quot;: &quot;late-month&quot;," in text


def test_members_read_the_page_and_run_dry_runs_but_only_managers_edit(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    client_for(actors.owner).post(page(actors), {"action": "document", "document": policy_text()})
    member = client_for(actors.teammate)
    text = member.get(page(actors)).content.decode()
    assert "Owners and admins change the policy." in text and 'name="document"' not in text
    assert member.post(page(actors), {"action": "document", "document": "{}"}).status_code == 403

    run = member.post(
        f"/teams/{actors.team.pk}/routing/dry-run/",
        {"model": "anything", "prompt_tokens": "1000000", "completion_tokens": "0", "metadata": ""},
    )
    assert run.status_code == 200
    body = run.content.decode()
    assert "Rule <strong>main</strong> matches (version 1)." in body
    assert f"Workers AI (fake)/{KIMI}" in body and "$0.95" in body  # a million fresh input tokens of K2.6

    bad = member.post(
        f"/teams/{actors.team.pk}/routing/dry-run/", {"model": "m", "metadata": "[1]", "prompt_tokens": "-1"}
    )
    assert bad.status_code == 400
    assert (
        "Metadata must be a JSON object" in bad.content.decode() and "Prompt tokens" in bad.content.decode()
    )
    assert client_for(actors.outsider).get(page(actors)).status_code == 404


def test_the_schema_is_published_and_a_deleted_connection_is_flagged(
    actors: Actors, workers_connection: ProviderConnection, openai_connection: ProviderConnection
) -> None:
    client = client_for(actors.owner)
    schema = client.get(f"/teams/{actors.team.pk}/routing/schema.json")
    assert schema["content-type"] == "application/schema+json" and schema.json() == POLICY_SCHEMA
    client.post(page(actors), {"action": "document", "document": policy_text("Gateway")})
    openai_connection.delete()
    text = client.get(page(actors)).content.decode()
    assert "names the connection &#x27;Gateway&#x27;, which no longer exists" in text


def test_a_key_is_made_to_follow_the_policy_on_the_api_keys_page(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    client = client_for(actors.owner)
    created = client.post(
        f"/teams/{actors.team.pk}/api-keys/new/",
        {"name": "routed", "connection": workers_connection.pk, "follows_policy": "on"},
    )
    assert created.status_code in (200, 302)
    assert ApiKey.objects.get(name="routed").follows_policy
    assert "follows the routing policy" in client.get(f"/teams/{actors.team.pk}/api-keys/").content.decode()
