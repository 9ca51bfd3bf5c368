"""The one writer of usage records."""

from __future__ import annotations

from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.utils import timezone

from playground.asyncutil import finish_even_if_cancelled
from playground.catalog.selectors import price_card_for
from playground.usage.metering import Outcome
from playground.usage.models import RequestPath, UsageRecord
from playground.usage.pricing import cost_for


@dataclass(frozen=True)
class RequestContext:
    """Who sent what, where: the part of a record known before the request is sent."""

    team_id: int
    user_id: int | None
    connection_id: int | None
    model_id: str
    conversation_id: int | None = None
    affinity_key: str = ""
    streamed: bool = True
    path: str = RequestPath.CHAT


def usage_record_create(*, context: RequestContext, outcome: Outcome) -> UsageRecord:
    card = price_card_for(model_id=context.model_id, day=timezone.now().date())
    cost = cost_for(usage=outcome.usage, card=card)
    usage = outcome.usage
    return UsageRecord.objects.create(
        team_id=context.team_id,
        user_id=context.user_id,
        connection_id=context.connection_id,
        model_id=context.model_id,
        conversation_id=context.conversation_id,
        path=context.path,
        affinity_key=context.affinity_key,
        streamed=context.streamed,
        status=outcome.status,
        prompt_tokens=usage.prompt_tokens,
        cached_tokens=usage.cached_tokens,
        completion_tokens=usage.completion_tokens,
        reasoning_tokens=usage.reasoning_tokens,
        usage_source=outcome.usage_source,
        raw_usage=dict(usage.raw) or None,
        price_card=card,
        input_cost=cost.input,
        cached_input_cost=cost.cached_input,
        output_cost=cost.output,
        total_cost=cost.total,
        ttft_ms=outcome.ttft_ms,
        latency_ms=outcome.latency_ms,
        upstream_request_id=outcome.upstream_request_id[:200],
        http_status=outcome.http_status,
        error_code=outcome.error_code[:40],
        error_text=outcome.error_text,
    )


async def ausage_record_create(*, context: RequestContext, outcome: Outcome) -> UsageRecord:
    """`usage_record_create` from async code; completes even if the caller is cancelled."""
    return await finish_even_if_cancelled(
        sync_to_async(usage_record_create)(context=context, outcome=outcome)
    )
