"""Routing policy versions in the team's chain of decision records (`playground.accounts.chain`).

A version's content is what decides routes: its team, number, document, note and time. Who
saved it is left out (the account may be deleted, which blanks it); the audit log names them.
"""

from __future__ import annotations

from playground.accounts.chain import AUDIT_EVENTS, ChainKind
from playground.routing.models import RoutingPolicy

POLICY_VERSIONS = ChainKind(
    "routing_policy",
    "routing policy version",
    RoutingPolicy,
    ("team_id", "version", "document", "note", "created_at"),
)

# Every kind of entry a team's chain holds, in the order the migration that chained existing rows
# breaks ties of equal times.
DECISION_KINDS = (AUDIT_EVENTS, POLICY_VERSIONS)
