"""Chat writes, one module per idea; callers import from the module that holds the name.

- `conversations`: starting a conversation and saving its settings (affinity, composer, tools).
- `turns`: one turn: the user's message saved, the request built and metered; a failed turn deleted.
- `history`: the saved messages as the history a request sends.
- `tool_continuations`: answering an answer's tool calls, by hand or from mocks (auto-mock mode).
- `uploads`: images uploaded for the next message, and removed before it is sent.
"""
