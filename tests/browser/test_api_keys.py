"""Team → API keys in a real browser: create a key on a connection whose models come in over
htmx, copy the secret shown once, reload (gone), revoke it. Screenshots: `test-artifacts/keys-*.png`."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect, sync_playwright

from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import catalog_seed
from playground.gateway.admission import api_key_authenticate
from playground.gateway.errors import GatewayError
from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.services import connection_models_store, connection_save
from playground.usage.api_keys import api_key_issue, secret_digest
from playground.usage.models import ApiKey, UsageRecord, UsageStatus
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.browser import (
    Console,
    LiveApp,
    chromium_connected,
    fake_workers_connection,
    fits_the_width,
    log_in,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def a_team_with_two_connections_and_a_key(actors: Actors, upstream: FakeUpstream) -> None:
    """Workers AI (the default) and an OpenAI-compatible gateway that listed two models; a key
    already in use, with a budget, limits and some spend this month."""
    catalog_seed(CatalogModel, PriceCard)  # a transactional test's flush empties the catalogue
    workers = fake_workers_connection(actors.team, upstream)
    ProviderConnection.objects.filter(pk=workers.pk).update(is_default=True)
    gateway = connection_save(
        connection=ProviderConnection(
            team=actors.team,
            name="Gateway",
            kind=ConnectionKind.OPENAI_COMPATIBLE,
            base_url=upstream.url + "/v1",
        ),
        token="sk-browser-gateway",
    )
    connection_models_store(connection=gateway, models=["gpt-4.1-mini", "llama-3.3-70b"])
    key, _secret = api_key_issue(
        team_id=actors.team.pk,
        name="nightly-batch",
        connection_id=workers.pk,
        created_by_id=actors.admin.pk,
        monthly_budget_usd=Decimal(25),
        requests_per_minute=120,
        tokens_per_minute=200_000,
        expires_at=timezone.now() + dt.timedelta(days=90),
    )
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now() - dt.timedelta(minutes=12))
    UsageRecord.objects.create(
        team=actors.team, api_key=key, model_id="m", status=UsageStatus.OK, total_cost=Decimal("3.1742")
    )


def test_an_owner_creates_a_key_copies_it_once_and_revokes_it(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str, artifacts: Path
) -> None:
    a_team_with_two_connections_and_a_key(actors, fake_upstream)
    console = Console()
    with sync_playwright() as playwright:
        browser = chromium_connected(playwright, chromium_path)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_app.url)
            page = context.new_page()
            page.on("console", console.watch)
            log_in(page, live_app.url, username="owner", then=f"/teams/{actors.team.pk}/members/")
            page.get_by_role("navigation", name="Team pages").get_by_role("link", name="API keys").click()
            expect(page.get_by_role("heading", name="API keys")).to_be_visible()
            expect(page.locator("tr", has_text="nightly-batch")).to_contain_text("$3.17")
            page.get_by_role("link", name="New API key").click()

            page.get_by_label("Name").fill("billing-agent")
            page.get_by_label("Connection").select_option(label="Gateway (OpenAI-compatible endpoint)")
            models = page.locator("#key-models")
            expect(models).to_contain_text("The models Gateway listed at its last test.")  # swapped over htmx
            models.get_by_label("gpt-4.1-mini").check()
            page.get_by_label("Monthly budget (USD)").fill("5")
            page.get_by_label("Requests per minute").fill("60")
            page.screenshot(path=artifacts / "keys-01-form.png", full_page=True)
            fits_the_width(page)
            page.get_by_role("button", name="Create key").click()

            expect(page).to_have_url(f"{live_app.url}/teams/{actors.team.pk}/api-keys/")  # redirected
            secret = page.locator("#new-key-secret").input_value()
            assert secret.startswith("pgk_")
            expect(page.locator("#new-key-snippet")).to_contain_text(
                f"curl -sS {live_app.url}/v1/chat/completions"
            )
            expect(page.locator("#new-key-snippet")).to_contain_text('"model": "gpt-4.1-mini"')
            page.get_by_role("button", name="Copy key").click()
            expect(page.get_by_role("button", name="Copied")).to_be_visible()
            assert page.evaluate("navigator.clipboard.readText()") == secret
            row = page.locator("tr", has_text="billing-agent")
            expect(row).to_contain_text(secret[:10] + "…")
            expect(row).to_contain_text("Active")
            page.screenshot(path=artifacts / "keys-02-secret-shown-once.png", full_page=True)
            fits_the_width(page)

            page.reload()
            expect(page.locator("#new-key-secret")).to_have_count(0)
            assert secret not in page.content()
            page.screenshot(path=artifacts / "keys-03-after-reload.png", full_page=True)

            page.once("dialog", lambda dialog: dialog.accept())
            row.get_by_role("button", name="Revoke").click()
            expect(row).to_contain_text("Revoked")  # the row, swapped over htmx
            expect(row.get_by_role("button", name="Revoke")).to_have_count(0)
            page.screenshot(path=artifacts / "keys-04-revoked.png", full_page=True)
            fits_the_width(page)

            page.goto(f"{live_app.url}/teams/{actors.team.pk}/audit/")
            expect(page.locator("tr", has_text="Revoked an API key")).to_contain_text("billing-agent")
            expect(page.locator("tr", has_text="Created an API key")).to_contain_text(
                "allowed models: gpt-4.1-mini"
            )
            assert secret not in page.content()
            page.screenshot(path=artifacts / "keys-05-audit.png", full_page=True)

            member = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            member.on("console", console.watch)
            log_in(member, live_app.url, username="teammate", then=f"/teams/{actors.team.pk}/api-keys/")
            expect(member.locator("tr", has_text="billing-agent")).to_contain_text("Revoked")
            expect(member.get_by_role("link", name="New API key")).to_have_count(0)
            expect(member.get_by_role("button", name="Revoke")).to_have_count(0)
            member.screenshot(path=artifacts / "keys-06-member-reads.png", full_page=True)
        finally:
            browser.close()
    assert console.problems == []
    key = ApiKey.objects.get(name="billing-agent")
    assert key.secret_sha256 == secret_digest(secret) and key.revoked_at is not None
    with pytest.raises(GatewayError, match="revoked"):
        api_key_authenticate(secret)
