"""`make run`: prepare the database and start engine, web and worker as one group.

Migrates, collects static files, creates the demo team and owner (printing the login the
first time), then hands the three processes to honcho, which stops them all on Ctrl-C.
The engine gets the same API token the web app uses to call it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import urllib.request
from urllib.parse import urlsplit

import django


def _manage(*args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], check=True)  # noqa: S603 (our own script)


def _announce_when_ready(url: str) -> None:
    """Print the URL once the web server answers, so it is not lost in the logs."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "login/", timeout=2):  # noqa: S310 (our own URL)
                break
        except OSError:
            time.sleep(0.5)
    print(f"\n  The playground is running at {url}  (Ctrl-C stops everything)\n", flush=True)


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
    django.setup()
    from django.conf import settings

    _manage("migrate", "--noinput", "-v", "0")
    _manage("collectstatic", "--noinput", "-v", "0")
    _manage("demo_setup")

    engine = urlsplit(settings.ENGINE_URL)
    env = {
        **os.environ,
        "ENGINE_API_TOKEN": settings.ENGINE_API_TOKEN,
        "ENGINE_PORT": str(engine.port or 8788),
        "ENGINE_REPLICAS": os.environ.get("ENGINE_REPLICAS", "2"),
        "APP_HOST": os.environ.get("APP_HOST", "127.0.0.1"),
        "APP_PORT": os.environ.get("APP_PORT", "8000"),
    }
    url = f"http://{env['APP_HOST']}:{env['APP_PORT']}/"
    threading.Thread(target=_announce_when_ready, args=(url,), daemon=True).start()
    honcho = os.path.join(os.path.dirname(sys.executable), "honcho")
    try:
        subprocess.run([honcho, "start", "-f", "Procfile"], env=env, check=False)  # noqa: S603 (our Procfile)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
