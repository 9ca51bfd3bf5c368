"""Chat writes, one module per idea; callers import from the module that holds the name.

- `conversations`: starting a conversation and saving its settings (affinity, composer, tools).
- `turns`: one turn: the user's message saved, the request built and metered; a failed turn deleted.
- `history`: the saved messages as the history a request sends.
- `tool_continuations`: answering an answer's tool calls, by hand or from mocks (auto-mock mode).
- `uploads`: images uploaded for the next message, and removed before it is sent.
- `branching`: edits and regenerations as new branches; switching, deleting a turn, forking.
- `preset_setups`: a conversation's setup saved as a preset version, or started from one.
- `preflight`: the next request's estimated prompt and cost, before it is sent.

Compare's writes are `chat.compare.services`; it builds on these, never the other way.
"""
