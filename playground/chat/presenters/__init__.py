"""What the chat's pages and sockets show, built from stored rows: plain values for templates.

- `messages`: messages, their images and tool calls as views, usage lines, the conversation list's rows.
- `tools`: tool calls and the tools panel.
- `rendering`: Markdown to safe HTML.
- `request_code`: "View code": a stored or the next request as curl, Python and JavaScript.

Presenters read and format; they write nothing.
"""
