"""Known usage rows for the analytics tests (the `known` fixture): three records of team Alpha, one of Bravo.

# time (UTC)       who      model     prompt cached out  ttft latency affinity status         conv
1 2026-11-20 09:10 owner    engine      2000  1500   100  420  2600  on       ok             A
2 2026-11-20 09:40 teammate engine      1000     0   200  900  1200  off      ok             A
3 2026-11-20 10:05 owner    Kimi K2.6  10000  none  1000 2500  8000  off      upstream_error -
4 2026-11-20 09:15 outsider engine     99999     0  9999  100   100  off      ok             Bravo's

The engine is priced as Kimi K2.5 ($0.60 / $0.10 / $3.00 per M), Kimi K2.6 at $0.95 / $0.16 / $4.00.

And the gateway's (`gateway_known_create`, on top of those), all on the engine, as Alpha's keys
"shop-bot" and "billing-agent" and Bravo's "bravo-bot" sent them:

# time (UTC)       key            end user session tags        prompt cached out  cost ($)  status
G1 2026-11-20 10:20 shop-bot       ana      s-1     prod,eu       1000   400    50  0.00055   ok
G2 2026-11-20 10:30 shop-bot       bo       s-2     prod          2000     0   100  0.0015    ok
G3 2026-11-20 10:40 billing-agent  ana      s-1     staging        500  none    10  0.00033   upstream_error
G4 2026-11-20 10:45 bravo-bot      ana      s-1     prod          7000     0   700  0.0063    ok (Bravo's)
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from asgiref.sync import async_to_sync
from django.http import QueryDict

from playground.analytics.filters import Filters, filters_from_query
from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26
from playground.chat.models import Conversation
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.api_keys import api_key_issue
from playground.usage.calls.context import Attribution, RequestContext
from playground.usage.metering import Outcome
from playground.usage.models import ApiKey, RequestPath, UsageRecord, UsageSource, UsageStatus
from playground.usage.records import usage_record_create
from tests.support.actors import Actors
from tests.support.clock import clock

NOW = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)


@dataclass
class Known:
    records: list[UsageRecord]
    conversation: Conversation
    other_conversation: Conversation


def record_write(
    at: dt.datetime,
    context: RequestContext,
    *,
    prompt: int,
    cached: int | None,
    out: int,
    ttft: int,
    latency: int,
    status: str = UsageStatus.OK,
    written: int | None = None,
) -> UsageRecord:
    outcome = Outcome(
        status=status,
        usage=NormalizedUsage(
            prompt_tokens=prompt,
            completion_tokens=out,
            cached_tokens=cached,
            cache_write_tokens=written,
            raw={"prompt_tokens": prompt, "completion_tokens": out},
        ),
        usage_source=UsageSource.PROVIDER,
        ttft_ms=ttft,
        latency_ms=latency,
        upstream_request_id=f"ray-{prompt}",
        error_text="Internal error" if status != UsageStatus.OK else "",
    )
    with clock(at):
        return usage_record_create(context=context, outcome=outcome)


def engine_priced_as_its_own_card() -> None:
    """The figures here were worked out with the engine at Kimi K2.5's launch prices: give it a
    card of its own at those prices (the catalogue prices it with K2.5's card of the day, K2.6's
    since K2.5 retired on 2026-05-30, which is not what these tests are about)."""
    engine = CatalogModel.objects.get(model_id=ENGINE_MODEL_ID)
    CatalogModel.objects.filter(pk=engine.pk).update(priced_as=None)
    PriceCard.objects.create(
        model=engine,
        effective_from=dt.date(2026, 1, 1),
        input_per_m=Decimal("0.60"),
        cached_input_per_m=Decimal("0.10"),
        output_per_m=Decimal("3.00"),
        label="Priced as Kimi K2.5 ($0.60 / $0.10 / $3.00): what these tokens would cost on Workers AI",
    )


def known_create(actors: Actors) -> Known:
    """The four rows of the table above, and the two conversations they belong to."""
    engine_priced_as_its_own_card()
    conversation = Conversation.objects.create(
        team=actors.team, user=actors.owner, model_id=ENGINE_MODEL_ID, title="Alpha's long chat"
    )
    other = Conversation.objects.create(
        team=actors.other_team, user=actors.outsider, model_id=ENGINE_MODEL_ID, title="Bravo secret"
    )
    day = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)

    def ctx(user: Any, model: str, **more: Any) -> RequestContext:
        return RequestContext(
            team_id=actors.team.pk, user_id=user.pk, connection_id=None, model_id=model, **more
        )

    records = [
        record_write(
            day.replace(hour=9, minute=10),
            ctx(actors.owner, ENGINE_MODEL_ID, conversation_id=conversation.pk, affinity_key="conv-a"),
            prompt=2000,
            cached=1500,
            out=100,
            ttft=420,
            latency=2600,
        ),
        record_write(
            day.replace(hour=9, minute=40),
            ctx(actors.teammate, ENGINE_MODEL_ID, conversation_id=conversation.pk),
            prompt=1000,
            cached=0,
            out=200,
            ttft=900,
            latency=1200,
        ),
        record_write(
            day.replace(hour=10, minute=5),
            ctx(actors.owner, KIMI_K26),
            prompt=10000,
            cached=None,
            out=1000,
            ttft=2500,
            latency=8000,
            status=UsageStatus.UPSTREAM_ERROR,
        ),
        record_write(
            day.replace(hour=9, minute=15),
            RequestContext(
                team_id=actors.other_team.pk,
                user_id=actors.outsider.pk,
                connection_id=None,
                model_id=ENGINE_MODEL_ID,
                conversation_id=other.pk,
            ),
            prompt=99999,
            cached=0,
            out=9999,
            ttft=100,
            latency=100,
        ),
    ]
    return Known(records=records, conversation=conversation, other_conversation=other)


@dataclass
class GatewayKnown:
    shop_bot: ApiKey
    billing_agent: ApiKey
    bravo_bot: ApiKey
    records: list[UsageRecord]  # G1 to G4


TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def gateway_known_create(actors: Actors) -> GatewayKnown:
    """The gateway's rows of the table above (with `known_create`'s engine card)."""
    day = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)

    def key(team: Any, name: str, creator: Any) -> ApiKey:
        issued, _ = api_key_issue(team_id=team.pk, name=name, connection_id=None, created_by_id=creator.pk)
        return issued

    shop, billing = (
        key(actors.team, "shop-bot", actors.owner),
        key(actors.team, "billing-agent", actors.teammate),
    )
    bravo = key(actors.other_team, "bravo-bot", actors.outsider)

    def sent(
        api_key: ApiKey, minute: int, prompt: int, cached: int | None, out: int, **more: Any
    ) -> UsageRecord:
        status = more.pop("status", UsageStatus.OK)
        context = RequestContext(
            team_id=api_key.team_id,
            user_id=api_key.created_by_id,
            connection_id=None,
            model_id=ENGINE_MODEL_ID,
            path=RequestPath.GATEWAY,
            affinity_key=more.pop("affinity_key", ""),
            attribution=Attribution(api_key_id=api_key.pk, **more),
        )
        at = day.replace(hour=10, minute=minute)
        return record_write(
            at, context, prompt=prompt, cached=cached, out=out, ttft=300, latency=900, status=status
        )

    records = [
        sent(
            shop, 20, 1000, 400, 50, end_user="ana", session="s-1", tags=("prod", "eu"),
            metadata={"order": 42, "note": "naïve <b>"}, trace_id=TRACE_ID, affinity_key="aff-1",
        ),
        sent(shop, 30, 2000, 0, 100, end_user="bo", session="s-2", tags=("prod",)),
        sent(
            billing, 40, 500, None, 10, end_user="ana", session="s-1", tags=("staging",),
            status=UsageStatus.UPSTREAM_ERROR,
        ),
        sent(bravo, 45, 7000, 0, 700, end_user="ana", session="s-1", tags=("prod",)),
    ]  # fmt: skip
    return GatewayKnown(shop_bot=shop, billing_agent=billing, bravo_bot=bravo, records=records)


def body(response: Any) -> bytes:
    """A response's bytes; an async stream (the exports) is read asynchronously, as the ASGI
    server reads it (joining it synchronously makes Django buffer it and warn)."""
    if not response.streaming:
        return response.content

    async def read() -> bytes:
        return b"".join([part async for part in response.streaming_content])

    return async_to_sync(read)()


def filters_for(actor: Any, **params: str) -> Filters:
    query = QueryDict(mutable=True)
    query.update({"range": "24h", **params})
    result = filters_from_query(user=actor, query=query, now=NOW)
    assert result is not None
    return result
