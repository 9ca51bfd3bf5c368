"""A conversation's messages as a tree: the branch on screen, its forks, and where a branch ends.

Every message points at the one before it on its branch (`Message.parent`); editing a question
or regenerating an answer adds a sibling, so the conversation keeps every branch. The branch
shown (and sent upstream) is the path from `Conversation.current_leaf` up to a first message.
`MessageTree` reads a conversation's (id, parent) pairs in one query and answers the rest in
memory: conversations hold hundreds of messages, not millions.
"""

from __future__ import annotations

from dataclasses import dataclass

from playground.chat.models import Conversation


@dataclass(frozen=True)
class MessageTree:
    """The shape of one conversation's tree: each message's parent, and each parent's children
    oldest first (None: the conversation's first messages)."""

    parents: dict[int, int | None]
    children: dict[int | None, list[int]]

    @classmethod
    def load(cls, conversation: Conversation) -> MessageTree:
        rows = conversation.messages.order_by("id").values_list("id", "parent_id")
        parents: dict[int, int | None] = {}
        children: dict[int | None, list[int]] = {}
        for message_id, parent_id in rows:
            parents[message_id] = parent_id
            children.setdefault(parent_id, []).append(message_id)
        return cls(parents=parents, children=children)

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

    def newest_leaf(self, top_id: int | None) -> int | None:
        """The last message written under `top_id` (itself included; None: the whole tree): a leaf,
        since a child is always saved after its parent, and where the user was on that branch."""
        newest = top_id
        stack = list(self.children.get(top_id, []))
        while stack:
            current = stack.pop()
            newest = current if newest is None else max(newest, current)
            stack += self.children.get(current, [])
        return newest


def branch_leaf_id(conversation: Conversation, tree: MessageTree) -> int | None:
    """The leaf of the branch shown: the conversation's current leaf, or, if that was lost (a
    message deleted elsewhere), the newest message."""
    leaf = conversation.current_leaf_id
    if leaf is not None and leaf in tree.parents:
        return leaf
    return tree.newest_leaf(None)
