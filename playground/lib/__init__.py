"""Helpers that belong to no app, below every floor: they import no playground app.

`env` imports nothing but the standard library, so the engine (its own process, no Django)
may use it too; `websocket_origin` needs Django and `asyncutil` needs asgiref.
"""
