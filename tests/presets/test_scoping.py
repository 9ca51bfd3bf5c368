"""Another team's preset or version is a 404 in every view and action of presets; viewers read
and export but neither save nor run; members save, use and diff."""

from __future__ import annotations

import pytest
from django.urls import reverse

from playground.batches.models import Batch
from playground.chat.models import Conversation
from playground.chat.services.conversations import conversation_create
from playground.presets.models import Preset, PresetVersion
from playground.providers.models import ProviderConnection
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.batches import NO_QUEUE_MODEL, jsonl, prompts
from tests.support.browser import fake_workers_connection
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def bravo_version(actors: Actors, fake_upstream: FakeUpstream, catalogue: None) -> PresetVersion:
    """Bravo's preset, saved by its owner (the outsider) from Bravo's conversation."""
    from playground.chat.services.preset_setups import conversation_preset_save

    connection = fake_workers_connection(actors.other_team, fake_upstream)
    conversation = conversation_create(
        user=actors.outsider, connection_id=connection.pk, model_id=NO_QUEUE_MODEL
    )
    return conversation_preset_save(
        user=actors.outsider, conversation_id=conversation.pk, preset_id=None, name="Bravo's secret"
    )


def test_another_teams_preset_and_version_are_a_404_in_every_view_and_action(
    actors: Actors,
    bravo_version: PresetVersion,
    set_up_conversation: Conversation,
    workers_connection: ProviderConnection,
) -> None:
    client = client_for(actors.owner)
    preset_id = bravo_version.preset_id
    gets = [
        reverse("presets:preset-detail", args=[preset_id]),
        reverse("presets:version-diff", args=[preset_id]),
        reverse("presets:version-diff", args=[preset_id]) + "?old=1&new=1",
        reverse("presets:version-export", args=[preset_id, 1]),
        reverse("analytics:log") + f"?team={actors.team.pk}&preset_version={bravo_version.pk}",
        reverse("analytics:log-totals") + f"?team={actors.team.pk}&preset_version={bravo_version.pk}",
    ]
    posts = [
        (reverse("presets:preset-detail", args=[preset_id]), {"text": "{}"}),
        (reverse("chat:conversation-from-preset", args=[bravo_version.pk]), {}),
        # Saving into Bravo's preset from Alpha's own conversation.
        (reverse("chat:preset-save", args=[set_up_conversation.pk]), {"preset": preset_id}),
    ]

    for url in gets:
        assert client.get(url).status_code == 404, url
    for url, data in posts:
        assert client.post(url, data).status_code == 404, url
    listing = client.get(reverse("presets:preset-list")).content.decode()
    assert "Bravo&#x27;s secret" not in listing and "Bravo's secret" not in listing
    # The batch form offers only the user's teams' versions: Bravo's is refused, nothing stored.
    refused = client.post(
        reverse("batches:batch-list"),
        {
            "connection": workers_connection.pk,
            "model_id": NO_QUEUE_MODEL,
            "input_kind": "jsonl",
            "text": jsonl(prompts(1)),
            "preset_version": bravo_version.pk,
        },
    )
    assert refused.status_code == 400 and not Batch.objects.exists()
    assert bravo_version.preset.versions.count() == 1
    assert not Conversation.objects.filter(team=actors.team, preset_version=bravo_version).exists()


def test_another_teams_conversation_cannot_be_saved_as_a_preset(
    actors: Actors, bravo_version: PresetVersion, set_up_conversation: Conversation
) -> None:
    response = client_for(actors.outsider).post(
        reverse("chat:preset-save", args=[set_up_conversation.pk]), {"name": "Stolen"}
    )

    assert response.status_code == 404
    assert not Preset.objects.filter(name="Stolen").exists()


def test_a_viewer_reads_diffs_and_exports_but_cannot_save_import_or_start(
    actors: Actors, version_one: PresetVersion, set_up_conversation: Conversation
) -> None:
    viewer = client_for(actors.viewer)
    preset_id = version_one.preset_id

    assert viewer.get(reverse("presets:preset-detail", args=[preset_id])).status_code == 200
    assert viewer.get(reverse("presets:version-diff", args=[preset_id])).status_code == 200
    assert viewer.get(reverse("presets:version-export", args=[preset_id, 1])).status_code == 200
    assert viewer.post(reverse("presets:preset-detail", args=[preset_id]), {"text": "{}"}).status_code == 403
    assert viewer.post(reverse("chat:conversation-from-preset", args=[version_one.pk])).status_code == 403
    assert (
        viewer.post(reverse("chat:preset-save", args=[set_up_conversation.pk]), {"name": "Mine"}).status_code
        == 403
    )
    # The import form offers viewers no team to import into.
    page = viewer.get(reverse("presets:preset-list")).content.decode()
    assert "owners, admins and members save them" in page
    assert Preset.objects.count() == 1 and PresetVersion.objects.count() == 1


def test_a_member_saves_version_two_from_the_conversation_and_the_diff_shows_the_change(
    actors: Actors, version_one: PresetVersion, set_up_conversation: Conversation
) -> None:
    client = client_for(actors.teammate)
    url = reverse("chat:preset-save", args=[set_up_conversation.pk])
    unchanged = client.post(url, {"preset": version_one.preset_id})
    Conversation.objects.filter(pk=set_up_conversation.pk).update(
        parameters={"temperature": 0.7, "max_tokens": 64}
    )

    saved = client.post(url, {"preset": version_one.preset_id, "note": "warmer"})
    diff = client.get(reverse("presets:version-diff", args=[version_one.preset_id]))

    assert "Nothing+changed+since+v1" in unchanged["Location"]
    assert saved.status_code == 302 and saved["Location"] == reverse(
        "presets:preset-detail", args=[version_one.preset_id]
    )
    assert version_one.preset.versions.count() == 2
    page = diff.content.decode()
    assert "Triage: v1 → v2" in page and "1 field changed" in page
    assert "&quot;temperature&quot;: 0.2</td>" in page and "&quot;temperature&quot;: 0.7</td>" in page
    assert 'id="diff-parameters"' in page and 'id="diff-tools"' not in page
    set_up_conversation.refresh_from_db()
    assert set_up_conversation.preset_version is not None and set_up_conversation.preset_version.number == 2
