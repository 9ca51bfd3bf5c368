"""Images in the composer, in a real browser under the strict CSP.

Two images (one by the attach button's file chooser, one dropped onto the composer) go to
a vision model on a loopback fake Workers AI upstream, which receives them as data URLs;
the test decodes what it received and checks types, sizes and hashes against the stored
attachments. An SVG pasted into the composer is refused in the page with the reason. On
the embedded engine's text-only model the attach control is disabled with the reason.
Screenshots go to `test-artifacts/`.
"""

from __future__ import annotations

import base64
import hashlib
import io
from pathlib import Path
from typing import Any

import pytest
from django.conf import LazySettings
from PIL import Image
from playwright.sync_api import ConsoleMessage, Page, expect, sync_playwright

from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import ENGINE_MODEL_ID, catalog_seed
from playground.chat.models import Attachment, Conversation, Message, MessageRole
from playground.chat.services.conversations import conversation_create
from playground.providers.services import connection_engine_ensure
from playground.usage.models import UsageRecord
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.browser import LiveApp, chat_ready, chromium_connected, fake_workers_connection, log_in
from tests.support.images import SVG, jpeg_with_gps, png

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCOUT = "@cf/meta/llama-4-scout-17b-16e-instruct"
TEXT_ONLY = "SmolLM2 135M Instruct (embedded engine) reads text only: it cannot be sent images."

# Builds a File from base64 in the page and hands it to the composer as a drop or a paste.
GIVE_FILE = """
([kind, b64, name, type]) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const data = new DataTransfer();
  data.items.add(new File([bytes], name, { type }));
  const composer = document.getElementById("composer");
  const target = kind === "paste" ? document.getElementById("composer-input") : composer;
  const event = kind === "paste"
    ? new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true })
    : new DragEvent("drop", { dataTransfer: data, bubbles: true, cancelable: true });
  target.dispatchEvent(event);
}
"""


@pytest.fixture
def chats(
    actors: Actors, fake_upstream: FakeUpstream, settings: LazySettings, tmp_path: Path
) -> dict[str, Any]:
    settings.MEDIA_ROOT = tmp_path / "media"
    catalog_seed(CatalogModel, PriceCard)  # a transactional test's flush empties the catalogue
    workers = fake_workers_connection(actors.team, fake_upstream)
    engine = connection_engine_ensure(team=actors.team)
    return {
        "vision": conversation_create(user=actors.teammate, connection_id=workers.pk, model_id=SCOUT),
        "engine": conversation_create(
            user=actors.teammate, connection_id=engine.pk, model_id=ENGINE_MODEL_ID
        ),
    }


LOADED = "(s) => [...document.querySelectorAll(s)].filter((i) => i.complete && i.naturalWidth > 0).length"


def loaded_images(page: Page, selector: str) -> int:
    return int(page.evaluate(LOADED, selector))


def wait_until_loaded(page: Page, selector: str) -> None:
    """Every image `selector` matches has loaded (served by the attachment view) and decoded."""
    page.wait_for_function(f"(s) => ({LOADED})(s) === document.querySelectorAll(s).length", arg=selector)


def test_two_images_reach_a_vision_model_as_data_urls_an_svg_is_refused_and_the_engine_cannot_attach(
    live_app: LiveApp,
    chats: dict[str, Conversation],
    fake_upstream: FakeUpstream,
    chromium_path: str,
    artifacts: Path,
    tmp_path: Path,
) -> None:
    shots = artifacts / "composer-images"
    shots.mkdir(exist_ok=True)
    wide = tmp_path / "wide.png"
    wide.write_bytes(png(3000, 1500, color=(220, 60, 60)))  # downscaled to 2,048 px before sending
    photo = jpeg_with_gps(640, 480)
    problems: list[str] = []

    def watch(message: ConsoleMessage) -> None:
        if message.type == "error" or "Content Security Policy" in message.text:
            problems.append(message.text)

    vision, engine = chats["vision"], chats["engine"]
    with sync_playwright() as playwright:
        browser = chromium_connected(playwright, chromium_path)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", watch)
            log_in(page, live_app.url)
            page.goto(f"{live_app.url}/chat/{vision.pk}/")
            chat_ready(page)
            expect(page.locator("#attach-button")).to_be_enabled()

            # One image through the attach button's file chooser, one dropped on the composer.
            with page.expect_file_chooser() as chooser:
                page.locator("#attach-button").click()
            chooser.value.set_files(str(wide))
            expect(page.locator(".attachment-chip")).to_have_count(1)
            page.evaluate(GIVE_FILE, ["drop", base64.b64encode(photo).decode(), "photo.jpg", "image/jpeg"])
            expect(page.locator(".attachment-chip")).to_have_count(2)
            wait_until_loaded(page, ".attachment-chip img")

            # A pasted SVG is refused in the page, with the reason; the two chips stay.
            page.evaluate(GIVE_FILE, ["paste", base64.b64encode(SVG).decode(), "logo.svg", "image/svg+xml"])
            notice = page.locator("#attach-notice")
            expect(notice).to_contain_text("logo.svg")
            expect(notice).to_contain_text("It is an SVG drawing")
            expect(page.locator(".attachment-chip")).to_have_count(2)
            page.screenshot(path=shots / "01-two-images-waiting-svg-refused.png")
            page.set_viewport_size({"width": 390, "height": 780})
            page.screenshot(path=shots / "01b-waiting-phone.png")
            page.set_viewport_size({"width": 1280, "height": 900})

            box = page.get_by_label("Message")
            box.fill("What differs between these two?")
            box.press("Enter")
            expect(page.locator(".message-assistant .usage-line:not(.usage-pending)")).to_be_visible()
            expect(page.locator(".message-user .message-images img")).to_have_count(2)
            wait_until_loaded(page, ".message-user .message-images img")
            expect(page.locator(".attachment-chip")).to_have_count(0)  # the tray emptied
            page.screenshot(path=shots / "02-sent-with-thumbnails.png")

            # After a reload the sent images are still shown, served by the attachment view.
            page.reload()
            expect(page.locator(".message-user .message-images img")).to_have_count(2)
            wait_until_loaded(page, ".message-user .message-images img")
            assert loaded_images(page, ".message-user .message-images img") == 2

            # The engine's text-only model: the attach control is disabled, with the reason.
            page.goto(f"{live_app.url}/chat/{engine.pk}/")
            expect(page.locator("#attach-button")).to_be_disabled()
            expect(page.locator("#attach-reason")).to_have_text(TEXT_ONLY)
            page.screenshot(path=shots / "03-engine-cannot-attach.png")
        finally:
            browser.close()

    assert problems == []
    # What the fake upstream received: two data URLs of the stored, re-encoded images.
    request = fake_upstream.requests[0]
    parts = request.json["messages"][-1]["content"]
    assert parts[0] == {"type": "text", "text": "What differs between these two?"}
    urls = [part["image_url"]["url"] for part in parts[1:]]
    message = Message.objects.get(role=MessageRole.USER)
    attachments = list(Attachment.objects.filter(message=message).order_by("pk"))
    assert len(urls) == len(attachments) == 2
    expected_types = ["image/png", "image/jpeg"]
    for url, attachment, content_type in zip(urls, attachments, expected_types, strict=True):
        head, encoded = url.split(",", 1)
        assert head == f"data:{content_type};base64"
        data = base64.b64decode(encoded)
        assert len(data) == attachment.size_bytes
        assert hashlib.sha256(data).hexdigest() == attachment.sha256
        received = Image.open(io.BytesIO(data))
        assert received.size == (attachment.width, attachment.height)
        assert not received.getexif()  # no camera or GPS position went upstream
    assert (attachments[0].width, attachments[0].height) == (2048, 1024)
    assert (attachments[1].width, attachments[1].height) == (640, 480)
    assert not Attachment.objects.filter(message__isnull=True).exists()
    # The request kept on the usage record ("View request") has each image's hash, type and size.
    request_body = UsageRecord.objects.get().request_body
    assert request_body is not None
    kept = request_body["messages"][-1]["content"]
    assert [part["image_url"]["url"] for part in kept[1:]] == [
        {"sha256": attachment.sha256, "content_type": content_type, "bytes": attachment.size_bytes}
        for attachment, content_type in zip(attachments, expected_types, strict=True)
    ]
