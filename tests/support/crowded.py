"""A team as a busy one looks after a few weeks, for the layout tests (`tests/browser/test_page_fit.py`):
long model ids, long connection, preset, key, conversation and tag names, and many rows, on the
presets pages, the Usage dashboard and the API keys page. Made before the browser starts (the
ORM cannot run inside Playwright's sync API)."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

from django.utils import timezone

from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26, catalog_seed
from playground.chat.models import Conversation
from playground.presets.models import Preset, PresetVersion
from playground.presets.setup import ConnectionRef, PresetSetup
from playground.providers.models import ProviderConnection
from playground.providers.structured_answers import answer_format
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.api_keys import api_key_issue
from playground.usage.calls.context import Attribution, RequestContext, RouteRecord
from playground.usage.metering import Outcome
from playground.usage.models import ApiKey, RequestPath, UsageSource, UsageStatus
from playground.usage.records import usage_record_create
from tests.support.actors import Actors
from tests.support.clock import clock

LONG_CONNECTION = "Workers AI — research account, EU jurisdiction, shared with the evaluation team"
LONG_MODELS = (
    "@cf/deepseek-ai/deepseek-r1-distill-qwen-32b",
    "accounts/fireworks/models/qwen2p5-coder-32b-instruct-long-context-preview",
)
LONG_TITLE = "Customer escalation triage for the Nordic enterprise accounts, second pass with the new rubric"
LONG_PRESET = "Support triage (Nordics) — strict JSON with escalation rubric and tone guide"
RUBRIC = (
    "You triage support tickets of enterprise customers in the Nordics. Answer in JSON only, with "
    "the escalation reason code from the rubric, the customer's tone and the next step."
)
LONG_TAGS = ("customer-support-escalations-nordics", "nightly-regression-suite-long-context")
LONG_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "enterprise_support_ticket_triage_with_escalation_rubric",
        "schema": {
            "type": "object",
            "properties": {"escalation_reason_code_from_rubric": {"enum": ["billing", "outage"]}},
            "required": ["escalation_reason_code_from_rubric"],
        },
    },
}


def crowded_presets(actors: Actors, connection: ProviderConnection, *, versions: int = 6) -> Preset:
    """A preset with a long name and `versions` versions, each on a long model id with a note."""
    preset = Preset.objects.create(team=actors.team, name=LONG_PRESET, created_by=actors.teammate)
    for number in range(1, versions + 1):
        model_id = LONG_MODELS[number % 2]
        PresetVersion.objects.create(
            preset=preset,
            number=number,
            connection=connection,
            model_id=model_id,
            setup=PresetSetup(
                connection=ConnectionRef(id=connection.pk, name=connection.name, kind=connection.kind),
                model_id=model_id,
                system_prompt=f"{RUBRIC} Revision {number}: {'escalate outages first; ' * number}",
            ).document(),
            note=f"v{number}: tightened the escalation rubric and the tone guide for enterprise accounts",
            created_by=actors.teammate,
        )
    return preset


def crowded_keys(actors: Actors, connection: ProviderConnection, *, count: int = 4) -> list[ApiKey]:
    """`count` keys with long names, allowed models, budgets, limits and some use; one revoked."""
    keys = []
    for number in range(count):
        key, _ = api_key_issue(
            team_id=actors.team.pk,
            name=f"nordic-enterprise-support-escalations-{number}",
            connection_id=connection.pk,
            created_by_id=actors.admin.pk,
            allowed_models=[*LONG_MODELS, KIMI_K26],
            monthly_budget_usd=Decimal(250),
            requests_per_minute=1200,
            tokens_per_minute=2_000_000,
            expires_at=timezone.now() + dt.timedelta(days=90),
        )
        keys.append(key)
    ApiKey.objects.filter(pk__in=[k.pk for k in keys]).update(
        last_used_at=timezone.now() - dt.timedelta(hours=3)
    )
    ApiKey.objects.filter(pk=keys[-1].pk).update(revoked_at=timezone.now())
    return keys


def crowded_usage(actors: Actors, connection: ProviderConnection, *, requests: int = 240) -> None:
    """A week of requests on every dashboard card: chat sessions with long titles on models whose
    context window is known (runway, hit ratio, growth), gateway requests of long-named keys, end
    users and tags (some routed, with fallbacks and a downgrade), structured answers under a
    long-named schema and preset version, and long model ids nobody priced."""
    catalog_seed(CatalogModel, PriceCard)  # a transactional test's flush empties the catalogue
    rng = random.Random(7)
    now = timezone.now()
    preset = crowded_presets(actors, connection, versions=2)
    version = preset.versions.order_by("-number").first()
    keys = crowded_keys(actors, connection, count=3)
    conversations = [
        Conversation.objects.create(
            team=actors.team,
            user=actors.owner,
            model_id=(KIMI_K26, ENGINE_MODEL_ID)[n % 2],
            title=f"{LONG_TITLE} #{n}",
        )
        for n in range(8)
    ]
    prompts = dict.fromkeys(conversations, 1500)
    for n in range(requests):
        at = now - dt.timedelta(minutes=rng.randint(30, 6 * 24 * 60))
        model_id = rng.choice([ENGINE_MODEL_ID, KIMI_K26, *LONG_MODELS])
        attribution, route, conversation = Attribution(), RouteRecord(), None
        if n % 3:
            conversation = rng.choice(conversations)
            prompts[conversation] += rng.randint(300, 900)
            prompt, model_id = prompts[conversation], conversation.model_id
        else:
            prompt = rng.randint(800, 9000)
            attribution = Attribution(
                api_key_id=rng.choice(keys).pk,
                end_user=f"enterprise-customer-{rng.randint(1, 12):02d}@support.nordic.example.com",
                session=f"gateway-session-{rng.randint(1, 5)}-{'x' * 40}",
                tags=LONG_TAGS,
            )
            route = _routed(rng, model_id) if n % 4 == 0 else route
        context = RequestContext(
            team_id=actors.team.pk,
            user_id=rng.choice([actors.owner.pk, actors.teammate.pk]),
            connection_id=connection.pk,
            model_id=model_id,
            conversation_id=conversation.pk if conversation else None,
            preset_version_id=version.pk if version and n % 5 == 0 else None,
            affinity_key=f"pg-{conversation.pk:032d}" if conversation else "",
            path=RequestPath.CHAT if conversation else RequestPath.GATEWAY,
            answer_format=answer_format(LONG_SCHEMA) if n % 7 == 0 else None,
            attribution=attribution,
            route=route,
        )
        ok = rng.random() > 0.08
        outcome = Outcome(
            status=UsageStatus.OK if ok else UsageStatus.UPSTREAM_ERROR,
            usage=NormalizedUsage(
                prompt_tokens=prompt,
                completion_tokens=rng.randint(50, 900),
                cached_tokens=int(prompt * rng.uniform(0.2, 0.95)),
            ),
            usage_source=UsageSource.PROVIDER,
            ttft_ms=int(rng.lognormvariate(6.2, 0.4)),
            latency_ms=int(rng.lognormvariate(7.8, 0.5)),
            answer_text='{"escalation_reason_code_from_rubric": "weather"}' if n % 2 else "{}",
        )
        with clock(at):
            usage_record_create(context=context, outcome=outcome)


def _routed(rng: random.Random, model_id: str) -> RouteRecord:
    """A request the policy sent to a backup after its first target timed out, perhaps downgraded."""
    first, final = f"{LONG_CONNECTION}/{model_id}", f"Backup gateway (us-east)/{model_id}"
    attempts = [
        {"target": first, "status": 504, "ms": 30_000, "moved_on": "upstream_timeout_after_first_token"},
        {"target": final, "status": None, "ms": 900, "moved_on": ""},
    ]
    downgraded = rng.random() < 0.3
    downgrade = {"reason": "budget_used_above", "requested": first, "requested_model_id": KIMI_K26}
    rule = "enterprise-escalations-long-context"
    return RouteRecord(
        rule=rule,
        fell_back=True,
        downgraded=downgraded,
        detail={
            "rule": rule,
            "attempt": 2,
            "attempts": attempts,
            "final": final,
            "downgrade": downgrade if downgraded else None,
        },
    )
