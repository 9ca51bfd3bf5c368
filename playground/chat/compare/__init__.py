"""Compare: one prompt sent at once to 2-4 targets, side by side; a column continues as a conversation.

Everything compare is here: `views` (its pages), `forms`, `selectors`, `services` (a comparison
stored, its columns built as the next turn of a conversation with their settings and run through
the metered call), `presenters`, `socket` (a `chat.sockets.base.StreamingSocket`) and `models`
(`Comparison`, `ComparisonColumn`: defined in `chat.models` so tables and migrations stay the
chat app's, named from here).

Compare builds on the chat (the composer, the turn's limits and checks, the relay) and never
the other way: no module of chat outside this package imports it but `urls` and `routing`
(checked by import-linter).
"""
