"""The one way a lower floor reaches up: a feature registers what it offers, by kind.

A floor may not import the features above it (docs/architecture.md), yet some of its pages
must name what a feature owns: a usage record's conversation, the settings a batch starts
from. So the lower floor keeps a `Registry`, each feature fills it in its
`AppConfig.ready()`, and the lower floor looks entries up by kind. A kind that no installed
app registered is simply absent.
"""

from __future__ import annotations


class Registry[T]:
    """Entries by kind ("conversation", "batch-item"), one per kind."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._entries: dict[str, T] = {}

    def register(self, kind: str, entry: T) -> None:
        """Add `entry` for `kind`; a second entry of another class for the same kind is a mistake.

        The same class again replaces the first: `ready()` can run twice (a test that changes
        the installed apps re-runs it).
        """
        existing = self._entries.get(kind)
        if existing is not None and type(existing) is not type(entry):
            raise ValueError(f"The {self._what} kind {kind!r} is already registered by {existing!r}.")
        self._entries[kind] = entry

    def get(self, kind: str) -> T | None:
        return self._entries.get(kind)
