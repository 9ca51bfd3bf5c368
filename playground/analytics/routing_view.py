"""What the record page shows of a routing decision: the rule, each attempt, the final target,
a downgrade, an added affinity key (from the record's `routing`, as the gateway stored it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from playground.usage.models import UsageRecord

MOVED_ON = {
    "timeout": "no first byte in time",
    "connect_error": "could not connect",
    "budget": "the budget could not cover it",
}


@dataclass(frozen=True)
class AttemptRow:
    number: int
    target: str
    status: str
    ms: int | None
    moved_on: str  # why the next attempt followed, in words ("" for the last)
    request_id: str
    linked: bool  # the attempt's record exists in the same team (and so may be opened)
    current: bool  # this record's own attempt


@dataclass(frozen=True)
class RoutingView:
    policy_version: int | None
    rule: str
    attempts: list[AttemptRow]
    final: str
    requested_model: str
    downgrade: dict[str, Any] | None
    affinity_added: bool
    session_inferred: bool  # its session was inferred from its messages (the client named none)


def record_routing(record: UsageRecord) -> RoutingView | None:
    """None for a record no routing policy decided."""
    decision = record.routing
    if not isinstance(decision, dict):
        return None
    attempts = [item for item in decision.get("attempts", []) if isinstance(item, dict)]
    ids = [str(item.get("request_id", "")) for item in attempts]
    found = {
        str(request_id)
        for request_id in UsageRecord.objects.filter(
            team_id=record.team_id, request_id__in=[i for i in ids if i]
        ).values_list("request_id", flat=True)
    }
    return RoutingView(
        policy_version=decision.get("policy_version"),
        rule=str(decision.get("rule") or ""),
        attempts=[
            AttemptRow(
                number=number,
                target=str(item.get("target", "")),
                status=_status(item.get("status")),
                ms=item.get("ms") if isinstance(item.get("ms"), int) else None,
                moved_on=_moved_on(str(item.get("moved_on") or "")),
                request_id=request_id,
                linked=request_id in found,
                current=request_id == str(record.request_id),
            )
            for number, (item, request_id) in enumerate(zip(attempts, ids, strict=True), 1)
        ],
        final=str(decision.get("final") or ""),
        requested_model=str(decision.get("requested_model") or ""),
        downgrade=decision.get("downgrade") if isinstance(decision.get("downgrade"), dict) else None,
        affinity_added=bool(decision.get("affinity_added")),
        session_inferred=bool(decision.get("session_inferred")),
    )


def _status(value: object) -> str:
    if value is None:
        return "answered"
    return str(value)


def _moved_on(value: str) -> str:
    if not value:
        return ""
    return MOVED_ON.get(value, f"the upstream answered {value}" if value.isdigit() else value)
