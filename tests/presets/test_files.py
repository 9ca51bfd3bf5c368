"""Export and import: a version's file imports back to the same setup (in the team or another),
and a broken file is refused with every problem at its JSON path, nothing saved, the text kept."""

from __future__ import annotations

import html
import json

import pytest
from django.urls import reverse

from playground.presets.models import Preset, PresetVersion, VersionImmutable
from playground.presets.selectors import version_setup
from playground.presets.services import preset_import
from playground.presets.setup import PresetInvalid, preset_file_parse
from playground.providers.models import ProviderConnection
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.browser import fake_workers_connection
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db


def _export(actors: Actors, version: PresetVersion) -> str:
    url = reverse("presets:version-export", args=[version.preset_id, version.number])
    response = client_for(actors.viewer).get(url)  # viewers read and export
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="preset-triage-v1.json"'
    return response.content.decode()


def test_an_exported_version_imports_into_another_team_with_the_same_setup(
    actors: Actors, version_one: PresetVersion, fake_upstream: FakeUpstream
) -> None:
    text = _export(actors, version_one)
    document = json.loads(text)
    assert document["format"] == "playground-preset" and document["version"] == 1
    assert document["setup"]["tools"][0]["mocks"] == ["18 °C, clear"]  # mocks travel with the tools
    assert document["setup"]["connection"] == {"name": "Workers AI (fake)", "kind": "workers-ai"}
    bravo_connection = fake_workers_connection(actors.other_team, fake_upstream)

    imported = preset_import(user=actors.outsider, team_id=actors.other_team.pk, text=text)

    assert imported.preset.team == actors.other_team and imported.preset.name == "Triage"
    assert imported.number == 1 and imported.connection == bravo_connection  # found by its name
    assert imported.setup == version_one.setup
    assert version_setup(imported).document() == version_setup(version_one).document()


def test_a_file_imported_into_its_own_preset_is_refused_as_a_version_that_changes_nothing(
    actors: Actors, version_one: PresetVersion
) -> None:
    text = _export(actors, version_one)
    edited = json.loads(text)
    edited["setup"]["parameters"]["temperature"] = 0.9
    edited["note"] = "warmer"

    with pytest.raises(Exception, match="Nothing changed since v1"):
        preset_import(
            user=actors.teammate, team_id=actors.team.pk, text=text, preset_id=version_one.preset_id
        )
    second = preset_import(
        user=actors.teammate, team_id=actors.team.pk, text=json.dumps(edited), preset_id=version_one.preset_id
    )

    assert second.number == 2 and second.note == "warmer"
    assert second.setup["parameters"] == {"temperature": 0.9, "max_tokens": 64}
    version_one.refresh_from_db()
    assert version_one.setup["parameters"]["temperature"] == 0.2  # v1 never changes


def test_a_broken_file_names_every_problem_at_its_path() -> None:
    broken = {
        "format": "playground-preset",
        "format_version": 1,
        "name": "Broken",
        "setup": {
            "connection": {"name": "Workers AI (fake)", "kind": "workers-ai"},
            "model": "",
            "tools": [{"type": "function", "function": {"name": "bad name!", "parameters": {"type": 7}}}],
            "tool_choice": "sometimes",
            "parameters": {"temperature": 9, "colour": "blue"},
            "response_format": {"type": "yaml"},
            "surprise": True,
        },
    }

    with pytest.raises(PresetInvalid) as caught:
        preset_file_parse(json.dumps(broken))

    paths = {problem.path for problem in caught.value.problems}
    assert {
        "$.setup.surprise",
        "$.setup.model",
        "$.setup.tools[0].function.name",
        "$.setup.tool_choice",
        "$.setup.parameters.temperature",
        "$.setup.parameters.colour",
        "$.setup.response_format",
    } <= paths
    assert any(path.startswith("$.setup.tools[0].function.parameters") for path in paths)
    messages = " ".join(caught.value.messages)
    assert "`temperature` must be a number from 0 to 2; got 9." in messages


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Paste a preset's JSON"),
        ("{not json", "Not valid JSON"),
        ("[1, 2]", "A preset file is a JSON object"),
        ('{"format": "openai-prompt", "name": "x", "setup": {}}', '$.format: Must be "playground-preset"'),
    ],
)
def test_what_is_not_a_preset_file_is_refused_plainly(text: str, message: str) -> None:
    with pytest.raises(PresetInvalid) as caught:
        preset_file_parse(text)
    assert message in " ".join(caught.value.messages)


def test_the_import_page_refuses_a_broken_file_keeps_the_text_and_saves_nothing(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    text = json.dumps(
        {
            "format": "playground-preset",
            "format_version": 1,
            "name": "Mine",
            "setup": {
                "connection": {"name": "Nowhere", "kind": "workers-ai"},
                "model": "@cf/x/y",
                "tools": {},
            },
        },
        indent=2,
    )

    response = client_for(actors.teammate).post(
        reverse("presets:preset-list"), {"team": actors.team.pk, "text": text}
    )

    assert response.status_code == 400
    page = response.content.decode()
    assert "Nothing was imported" in page
    assert "$.setup.tools: Must be an array of tools." in page
    assert html.escape(text) in page  # the text is still in the box, to fix
    assert not Preset.objects.exists()


def test_a_file_naming_a_connection_the_team_lacks_asks_for_one_and_then_imports(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    text = json.dumps(
        {
            "format": "playground-preset",
            "format_version": 1,
            "name": "Moved",
            "setup": {"connection": {"name": "Nowhere", "kind": "workers-ai"}, "model": "@cf/x/y"},
        }
    )
    client = client_for(actors.teammate)

    refused = client.post(reverse("presets:preset-list"), {"team": actors.team.pk, "text": text})
    chosen = client.post(
        reverse("presets:preset-list"),
        {"team": actors.team.pk, "text": text, "connection": workers_connection.pk},
    )

    assert "This team has no connection named &#x27;Nowhere&#x27;" in refused.content.decode()
    assert chosen.status_code == 302
    version = PresetVersion.objects.get()
    assert version.connection == workers_connection
    assert version.setup["connection"] == {"name": "Workers AI (fake)", "kind": "workers-ai"}


def test_a_saved_version_cannot_be_changed_only_followed(version_one: PresetVersion) -> None:
    version_one.note = "rewritten history"

    with pytest.raises(VersionImmutable):
        version_one.save()

    version_one.refresh_from_db()
    assert version_one.note == ""
