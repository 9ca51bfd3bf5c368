"""What caused a usage record, as a label and a link: a registry that the feature apps fill.

A record names what caused it by a plain id, never a foreign key: `conversation_id` for a
chat turn, `source` for a compare column ("compare-column:7:1") or a batch item
("batch-item:42:1"). (A gateway request names its `api_key`: keys live in usage, so that one
may be a foreign key.) Usage stands below the features and imports none of them, and records
outlive what caused them (deleting a conversation keeps its records, still pointing at its
id). Each feature registers a resolver for its kind in its `AppConfig.ready()` (chat:
conversations and compare columns; batches: batch items), and the request log, the record
page and the conversation charts ask here, in bulk and scoped to one team.
An id that does not resolve in the team reads "Conversation #12 (deleted)", with no link.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from playground.lib.registry import Registry
from playground.usage.models import UsageRecord

CONVERSATION = "conversation"
BATCH_ITEM = "batch-item"
COMPARISON_COLUMN = "compare-column"

_SOURCE = re.compile(r"^(?P<kind>[a-z][a-z-]*):(?P<id>\d+):(?P<attempt>\d+)$")


@dataclass(frozen=True)
class SourceKey:
    """One thing that caused records, and which try of it (a retried batch item is a new record)."""

    kind: str
    id: int
    attempt: int = 1


@dataclass(frozen=True)
class Found:
    """What a resolver knows of one of its things."""

    url: str
    title: str = ""  # its own name, when it has one (a conversation's title)


@dataclass(frozen=True)
class SourceLink:
    label: str  # "Conversation #12", "Batch item 42, attempt 2", "Conversation #12 (deleted)"
    url: str = ""  # none once the thing is gone
    title: str = ""

    @property
    def name(self) -> str:
        """The thing's own name, else its label."""
        return self.title or self.label


class SourceResolver(Protocol):
    # The label of one, e.g. "Conversation #{id}": formatted with the id.
    label: str

    def resolve(self, *, team_id: int, ids: Collection[int]) -> Mapping[int, Found]:
        """Those of `ids` that team `team_id` owns, in one query: another team's are left out."""
        ...


resolvers: Registry[SourceResolver] = Registry("usage record source")


def source_string(kind: str, thing_id: int, attempt: int) -> str:
    """A record's `source`: unique per thing and try, so a redelivered task cannot record it twice."""
    return f"{kind}:{thing_id}:{attempt}"


def record_source_key(*, conversation_id: int | None, source: str) -> SourceKey | None:
    """What caused a record, from its two columns; None when nothing known did."""
    if conversation_id is not None:
        return SourceKey(CONVERSATION, conversation_id)
    match = _SOURCE.match(source)
    if match is None:
        return None
    return SourceKey(match["kind"], int(match["id"]), int(match["attempt"]))


def source_links(*, team_id: int, keys: Iterable[SourceKey]) -> dict[SourceKey, SourceLink]:
    """Labels and links for `keys`, one query per kind; a kind no app registered is left out."""
    ids_by_kind: dict[str, set[int]] = defaultdict(set)
    wanted = set(keys)
    for key in wanted:
        ids_by_kind[key.kind].add(key.id)
    found: dict[str, Mapping[int, Found]] = {}
    for kind, ids in ids_by_kind.items():
        resolver = resolvers.get(kind)
        if resolver is not None:
            found[kind] = resolver.resolve(team_id=team_id, ids=ids)
    links = {}
    for key in wanted:
        resolver = resolvers.get(key.kind)
        if resolver is None:
            continue
        label = resolver.label.format(id=key.id) + (f", attempt {key.attempt}" if key.attempt > 1 else "")
        thing = found[key.kind].get(key.id)
        links[key] = SourceLink(label, thing.url, thing.title) if thing else SourceLink(f"{label} (deleted)")
    return links


def record_source_links(*, team_id: int, records: Sequence[UsageRecord]) -> list[SourceLink | None]:
    """Each record's link, in order (a page of the log: one query per kind on the page)."""
    keys = [record_source_key(conversation_id=r.conversation_id, source=r.source) for r in records]
    links = source_links(team_id=team_id, keys=[key for key in keys if key is not None])
    return [links.get(key) if key is not None else None for key in keys]
