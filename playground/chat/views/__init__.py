"""Chat pages, one module per page family; `chat/urls.py` imports each module.

- `conversation_page`: the conversation list, a new conversation, the chat page and its
  drawers (model options, affinity, composer, tools, a message's stored request).
- `conversations`: rename, delete, change the model, the quick switcher.
- `branches`: show another branch, delete a turn, fork.
- `code`: "View code" and the pre-flight cost of the next request.
- `attachments`: image upload, removal, and serving.
- `presets`: save a conversation's setup as a preset version, start one from it.
- `lookups`, `model_picker`: not pages: the conversation every page starts from (or a 404), and
  the model field shared by the new-conversation form and the Model drawer.

The rule: views are thin. They parse with `chat.forms`, read with `chat.selectors`, write
through `chat.services` and show with `chat.presenters`; they decide nothing a socket would
decide differently. Every lookup goes through a selector or service scoped to the user's teams,
so another team's conversation, message or attachment is a 404 on every path; the role a write
needs is checked again by the service. Compare's pages are `chat.compare.views`; what streams
(a turn, an edit, a regeneration, a comparison's run) is a socket command (`chat.sockets`),
never a view.
"""
