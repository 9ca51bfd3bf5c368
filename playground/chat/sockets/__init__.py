"""The chat's WebSockets' shared parts; routes in `chat/routing.py`.

- `base`: `StreamingSocket`, the skeleton both sockets share (who may connect, the signed-in
  check on every message, one task at a time holding a concurrent-turn slot, stop-and-wait).
- `chat`: the chat socket (`/ws/chat/<conversation id>/`): turns, edits, regenerations, tool continuations.
- `commands`: what a socket message asks for, parsed before any service runs.
- `relay`: streamed text batched into frames.
- `paths`: where the sockets listen (the routes mount them there, the pages connect there).

The compare socket is `chat.compare.socket`, a `StreamingSocket` too.
"""
