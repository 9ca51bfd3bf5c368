"""What the chat's pages and sockets show, built from stored rows: plain values for templates.

- `messages`: messages as views: text or rendered answer, images, branch arrows, structured output.
- `usage`: an answer's usage line (tokens, cache, cost, timings, status) and its stored request.
- `conversations`: the conversation list's rows, model options, the composer's notes.
- `tools`: tool calls and the tools panel.
- `rendering`: Markdown to safe HTML.
- `request_code`: "View code": a stored or the next request as curl, Python and JavaScript.

Presenters read and format; they write nothing.
"""
