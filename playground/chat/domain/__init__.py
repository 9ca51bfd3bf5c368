"""What a conversation's turn is made of, with no page, socket or service of its own.

- `branches`: the message tree and the branch a conversation shows.
- `composer`: the request a conversation sends, from its settings and capabilities.
- `tools`: tool definitions, calls and mocked results.
- `attachments`: images checked, re-encoded, stored and sent.

Services, selectors and presenters build on these; these import none of them.
"""
