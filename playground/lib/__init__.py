"""Helpers that belong to no app, below every floor: they import no playground app.

`env` and `json_types` import nothing but the standard library, so the engine (its own
process, no Django) may use them too; `websocket_origin` needs Django and `asyncutil` needs asgiref.
"""
