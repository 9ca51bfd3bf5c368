"""The playground: a Django project and, in `playground.engine`, a process of its own.

Imports nothing on purpose: `python -m playground.engine` runs this file first, and the
engine starts without Django or Celery (tests/engine/test_main.py). The Celery app is
`playground.celery`; Django processes load it from `BatchesConfig.ready()`, and
`celery -A playground` finds it there by name.
"""
