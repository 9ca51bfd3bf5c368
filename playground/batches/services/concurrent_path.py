"""The concurrent path: a step sends open items as separate metered requests, a few at a time, for a slice."""

from __future__ import annotations

import asyncio
import logging
import time

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.core.exceptions import ValidationError

from playground.batches.models import Batch, BatchItem, ItemState
from playground.batches.services.chain import OPEN_STATES, fail_open_items, lease_renew
from playground.batches.services.metered_item import ItemTerms, item_send, item_terms
from playground.providers.adapters import ChatAdapter, adapter_for

logger = logging.getLogger(__name__)


def concurrent_step(batch: Batch, token: str) -> float | None:
    """Run open items, `BATCH_CONCURRENCY` at a time, for one time slice; 0: continue at once."""
    assert batch.connection is not None
    try:
        adapter = adapter_for(batch.connection)
    except ValidationError as exc:
        fail_open_items(batch, " ".join(exc.messages), code="connection_unusable")
        return None
    more = async_to_sync(_run_concurrently)(batch, token, adapter, item_terms(batch))
    return 0 if more else None


async def _run_concurrently(batch: Batch, token: str, adapter: ChatAdapter, terms: ItemTerms) -> bool:
    """True when open items remain after the slice (and this chain still owns the batch)."""
    deadline = time.monotonic() + settings.BATCH_STEP_SECONDS
    slots = asyncio.Semaphore(settings.BATCH_CONCURRENCY)
    lease = {"owned": True}
    running: set[asyncio.Task[None]] = set()

    async def keep_lease() -> None:
        while lease["owned"]:
            await asyncio.sleep(settings.BATCH_LEASE_SECONDS / 3)
            lease["owned"] = await sync_to_async(lease_renew)(batch.pk, token)

    async def one(item: BatchItem) -> None:
        try:
            if await sync_to_async(_mark_submitted)(item):
                await item_send(batch, item, adapter, terms)
        finally:
            slots.release()

    def go_on() -> bool:
        return lease["owned"] and time.monotonic() < deadline

    keeper = asyncio.create_task(keep_lease())
    after = -1
    try:
        while go_on() and (page := await sync_to_async(_open_items_after)(batch.pk, after)):
            for item in page:
                await slots.acquire()
                if not go_on():
                    slots.release()
                    break
                task = asyncio.create_task(one(item))
                running.add(task)
                task.add_done_callback(running.discard)
                after = item.index
        for failure in await asyncio.gather(*running, return_exceptions=True):
            if isinstance(failure, BaseException):  # the item stays open: the next step sends it again
                logger.error("batch %s: an item failed unexpectedly", batch.pk, exc_info=failure)
    finally:
        keeper.cancel()
    return (
        lease["owned"] and await BatchItem.objects.filter(batch_id=batch.pk, state__in=OPEN_STATES).aexists()
    )


def _open_items_after(batch_id: int, index: int) -> list[BatchItem]:
    return list(
        BatchItem.objects.filter(batch_id=batch_id, state__in=OPEN_STATES, index__gt=index).order_by("index")[
            :200
        ]
    )


def _mark_submitted(item: BatchItem) -> bool:
    """pending (or left submitted by a dead step) -> submitted; False if it was cancelled meanwhile."""
    return (
        BatchItem.objects.filter(pk=item.pk, attempt=item.attempt, state__in=OPEN_STATES).update(
            state=ItemState.SUBMITTED
        )
        == 1
    )
