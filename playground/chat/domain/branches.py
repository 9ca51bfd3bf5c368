"""A conversation's messages as a tree: the branch on screen, its forks, and where a branch ends.

Every message points at the one before it on its branch (`Message.parent`); editing a question
or regenerating an answer adds a sibling, so the conversation keeps every branch. The branch
shown (and sent upstream) is the path from `Conversation.current_leaf` up to a first message.
Switching to another branch shows it down to the leaf the user was on last under it (a leaf's
last visit is when it was written, or when a switch last showed it: `Message.visited_at`).
`MessageTree` reads a conversation's (id, parent, visit) rows in one query and answers the rest
in memory: conversations hold hundreds of messages, not millions.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from playground.chat.models import Conversation


@dataclass(frozen=True)
class MessageTree:
    """The shape of one conversation's tree: each message's parent, each parent's children
    oldest first (None: the conversation's first messages), and when each was last visited."""

    parents: dict[int, int | None]
    children: dict[int | None, list[int]]
    visits: dict[int, dt.datetime]  # written, or last shown by a branch switch, whichever is later

    @classmethod
    def load(cls, conversation: Conversation) -> MessageTree:
        rows = conversation.messages.order_by("id").values_list("id", "parent_id", "created_at", "visited_at")
        parents: dict[int, int | None] = {}
        children: dict[int | None, list[int]] = {}
        visits: dict[int, dt.datetime] = {}
        for message_id, parent_id, created_at, visited_at in rows:
            parents[message_id] = parent_id
            children.setdefault(parent_id, []).append(message_id)
            visits[message_id] = max(created_at, visited_at) if visited_at else created_at
        return cls(parents=parents, children=children, visits=visits)

    def path(self, leaf_id: int | None) -> list[int]:
        """The ids from a first message down to `leaf_id` (empty for None or an unknown id)."""
        path: list[int] = []
        current = leaf_id if leaf_id in self.parents else None
        while current is not None:
            path.append(current)
            current = self.parents[current]
        path.reverse()
        return path

    def siblings(self, message_id: int) -> list[int]:
        """The message and the others with its parent (its branch alternatives), oldest first."""
        return self.children.get(self.parents.get(message_id), [message_id])

    def last_visited_leaf(self, top_id: int | None) -> int | None:
        """Where the user left the branch through `top_id` (None: the whole tree): of the leaves
        under it (itself, if it is one), the one written or shown last, the newest on a tie.

        Not simply the newest message: an answer regenerated, then its first version shown again
        with the arrows, is left on the first; a switch away and back must return there."""
        leaves = []
        stack = [top_id] if top_id is not None else list(self.children.get(None, []))
        while stack:
            current = stack.pop()
            below = self.children.get(current, [])
            stack += below
            if not below:
                leaves.append(current)
        return max(leaves, key=lambda leaf: (self.visits[leaf], leaf), default=top_id)


def branch_leaf_id(conversation: Conversation, tree: MessageTree) -> int | None:
    """The leaf of the branch shown: the conversation's current leaf, or, if that was lost (a
    message deleted elsewhere), the leaf visited last."""
    leaf = conversation.current_leaf_id
    if leaf is not None and leaf in tree.parents:
        return leaf
    return tree.last_visited_leaf(None)
