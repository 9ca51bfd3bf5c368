"""Requests that arrive while a group is being admitted are admitted together, as the next group.

Admission is the gateway's one blocking step before anything is sent, and on one database
thread each request's step waited for all those before it. Together, a group costs about
what one request did (issue 24): one thread hop, one statement for the keys, one
transaction holding the ledgers once for the group (`gateway_admit_many`). Alone, a request
is admitted at once; under load, the groups grow by themselves.
"""

from __future__ import annotations

import asyncio
import weakref

from playground.gateway.admission import AdmissionRequest, Admitted, gateway_admit_many
from playground.gateway.idempotency import Replay
from playground.lib.asyncutil import GroupQueue, loop_local
from playground.lib.db import connections_heal, db_run

type _Queue = GroupQueue[AdmissionRequest, Admitted | Replay]
_queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue] = weakref.WeakKeyDictionary()


async def admit(request: AdmissionRequest) -> Admitted | Replay:
    """`request` admitted with those arriving meanwhile; raises its `GatewayError` when refused."""
    return await loop_local(_queues, _new_queue).submit(request)


def _new_queue() -> _Queue:
    return GroupQueue(_admit_group)


async def _admit_group(requests: list[AdmissionRequest]) -> list[Admitted | Replay | Exception]:
    def work() -> list[Admitted | Replay | Exception]:
        connections_heal()
        return gateway_admit_many(requests)

    return await db_run(work)
