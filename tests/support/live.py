"""The real ASGI app served by uvicorn on loopback, for tests that need a real HTTP server:
the browser flows and the gateway's SDK tests (`live_app`).

The server runs in a thread of the test process, so it uses the test database: with
SQLite a file in the temporary folder (`tests/settings.py`), with PostgreSQL an ordinary
database. Tests
that use it must be transactional (`transactional_db`), or the server could not see
what the test wrote. The server's ORM work all runs in asgiref's single sync thread, so
SQLite sees one writer at a time.

Static files are served by Django's `ASGIStaticFilesHandler` around the application (as
Django's own live server does), so tests need not run `collectstatic`. WebSockets pass
straight through to the real router.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from asgiref.sync import sync_to_async
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.db import DEFAULT_DB_ALIAS, connections

from tests.support.browser import LiveApp


@pytest.fixture
def live_app(transactional_db: None) -> Iterator[LiveApp]:
    from playground.asgi import application

    # Django runs each request's ORM work in a thread of its own; with persistent
    # connections (the services profile) those would outlive the test and keep PostgreSQL
    # from dropping the test database. The dict is shared by every thread's connection.
    db_settings = connections.settings[DEFAULT_DB_ALIAS]
    conn_max_age = db_settings.get("CONN_MAX_AGE", 0)
    db_settings["CONN_MAX_AGE"] = 0

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        ASGIStaticFilesHandler(application),
        lifespan="off",
        log_level="warning",
        access_log=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="live-app", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the live app did not start")
        time.sleep(0.02)
    yield LiveApp(url=f"http://127.0.0.1:{port}")
    server.should_exit = True
    thread.join(10)
    sock.close()
    asyncio.run(sync_to_async(connections.close_all)())  # asgiref's shared sync thread
    db_settings["CONN_MAX_AGE"] = conn_max_age
