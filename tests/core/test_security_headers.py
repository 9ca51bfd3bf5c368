"""Browser-facing headers: a strict Content-Security-Policy and Referrer-Policy on every page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from tests.support.actors import Actors
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db

TEMPLATES = sorted((Path(settings.BASE_DIR) / "templates").rglob("*.html"))
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
EVENT_HANDLER = re.compile(r"\son[a-z]+\s*=", re.IGNORECASE)
INLINE_STYLE = re.compile(r"<style\b|\sstyle\s*=", re.IGNORECASE)


def directives(header: str) -> dict[str, list[str]]:
    return {name: values for name, *values in (part.split() for part in header.split(";") if part.strip())}


@pytest.mark.parametrize("url", [reverse("login"), reverse("chat:conversation-list"), reverse("admin:index")])
def test_every_page_sends_a_strict_content_security_policy(actors: Actors, url: str) -> None:
    actors.owner.is_staff = actors.owner.is_superuser = True  # the admin is for superusers only
    actors.owner.save()
    client = client_for(actors.owner)

    response = client.get(url)

    assert response.status_code == 200

    policy = directives(response["Content-Security-Policy"])
    assert policy["script-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'"]
    assert policy["default-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"]
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda path: path.name)
def test_no_template_carries_inline_script_or_style(template: Path) -> None:
    source = template.read_text()

    assert not INLINE_SCRIPT.search(source), "move the script to static/js/"
    assert not EVENT_HANDLER.search(source), "inline event handlers need 'unsafe-inline'"
    assert not INLINE_STYLE.search(source), "move the style to static/css/"
    assert "javascript:" not in source
