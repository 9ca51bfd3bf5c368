"""What the chat registers with the registries of the floors below it (in `ChatConfig.ready`), so
they name chat's objects without importing chat: `sources` (a usage record's conversation or
compare column) and `presets` (a conversation's settings as a request preset for batches)."""
