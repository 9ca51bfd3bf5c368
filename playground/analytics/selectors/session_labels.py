"""How the dashboard names a session (`usage.insights.sessions` key): a conversation by its title and
page, a gateway session or an affinity key by its value."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from playground.usage.insights import sessions
from playground.usage.insights.session_inference import INFERRED
from playground.usage.sources import CONVERSATION, SourceKey, source_links


@dataclass(frozen=True)
class SessionLabel:
    kind: str  # "Conversation", "Gateway session", "Affinity key"
    name: str
    url: str = ""  # a conversation's page, while it exists

    @property
    def text(self) -> str:
        return f"{self.kind} {self.name}"


def session_labels(*, team_id: int, keys: Iterable[str]) -> dict[str, SessionLabel]:
    """A label for each key; conversations' titles and links in one query (another team's are
    not named: the keys come from this team's records, and the resolver checks the team)."""
    keys = list(keys)
    conversations = {
        key: int(key.removeprefix(sessions.CONVERSATION))
        for key in keys
        if key.startswith(sessions.CONVERSATION)
    }
    links = source_links(team_id=team_id, keys=[SourceKey(CONVERSATION, pk) for pk in conversations.values()])
    labels = {}
    for key in keys:
        if key in conversations:
            link = links.get(SourceKey(CONVERSATION, conversations[key]))
            name = link.title if link and link.title else f"#{conversations[key]}"
            labels[key] = SessionLabel("Conversation", name, link.url if link else "")
        elif key.startswith(INFERRED):
            labels[key] = SessionLabel("Inferred from the prompt", key.removeprefix(INFERRED))
        elif key.startswith(sessions.GATEWAY_SESSION):
            labels[key] = SessionLabel("Gateway session", key.removeprefix(sessions.GATEWAY_SESSION))
        else:
            labels[key] = SessionLabel("Affinity key", key.removeprefix(sessions.AFFINITY))
    return labels
