"""`make run`: prepare the database and start engine, web, worker and beat as one group.

Migrates, collects static files, creates the demo team and owner (printing the login the
first time), empties the metrics folder (`PROMETHEUS_MULTIPROC_DIR`, default
`var/prometheus`: the web and worker processes count into it, `/metrics` sums it), then hands
the four processes to honcho, which stops them all on Ctrl-C.
The engine gets the same API token the web app uses to call it. The URL is printed only
once the web app answers and every engine replica has passed its self-test; when the
engine cannot start, honcho stops the group and this exits non-zero after the engine's
own message.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import django


def manage(*args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], check=True)  # noqa: S603 (our own script)


def metrics_folder_fresh(default: Path) -> str:
    """The multiprocess metrics folder, emptied: the files of a previous run's processes would
    otherwise be summed with this run's for good."""
    folder = Path(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or default)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return str(folder)


def _engine_ready(engine_url: str, token: str) -> bool:
    headers = {"Authorization": f"Bearer {token}"}
    request = urllib.request.Request(engine_url + "/healthz", headers=headers)  # noqa: S310 (our own URL)
    try:
        with urllib.request.urlopen(request, timeout=2) as response:  # noqa: S310
            health: dict[str, object] = json.load(response)
            return health.get("status") == "ok"
    except (OSError, ValueError):
        return False


def web_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "login/", timeout=2):  # noqa: S310 (our own URL)
            return True
    except OSError:
        return False


def _announce_when_ready(url: str, engine_url: str, token: str) -> None:
    """Print the URL once the app can answer, so it is not lost in the logs."""
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if _engine_ready(engine_url, token) and web_ready(url):
            print(f"\n  The playground is running at {url}  (Ctrl-C stops everything)\n", flush=True)
            return
        time.sleep(0.5)


def processes_env() -> dict[str, str]:
    """The environment honcho hands every process: the engine's token and port as the web app
    calls it, the web app's address, and the metrics folder they all count into (emptied)."""
    from django.conf import settings

    engine = urlsplit(settings.ENGINE_URL)
    return {
        **os.environ,
        "ENGINE_API_TOKEN": settings.ENGINE_API_TOKEN,
        "ENGINE_PORT": str(engine.port or 8788),
        "APP_HOST": os.environ.get("APP_HOST", "127.0.0.1"),
        "APP_PORT": os.environ.get("APP_PORT", "8000"),
        "PROMETHEUS_MULTIPROC_DIR": metrics_folder_fresh(settings.DATA_DIR / "prometheus"),
    }


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
    django.setup()
    from django.conf import settings

    manage("migrate", "--noinput", "-v", "0")
    manage("collectstatic", "--noinput", "-v", "0")
    manage("demo_setup")

    env = processes_env()
    url = f"http://{env['APP_HOST']}:{env['APP_PORT']}/"
    threading.Thread(
        target=_announce_when_ready, args=(url, settings.ENGINE_URL, settings.ENGINE_API_TOKEN), daemon=True
    ).start()
    supervise(["start", "-f", "Procfile"], env=env, name="make run")


def supervise(honcho_args: list[str], *, env: dict[str, str], name: str) -> None:
    """Run honcho with `honcho_args` until it stops; exits non-zero when a process died.

    A SIGTERM (a supervisor, `kill`) is passed on, so honcho stops the group as on Ctrl-C:
    dying alone, this process left the engine, the web server and the worker running.
    """
    honcho = os.path.join(os.path.dirname(sys.executable), "honcho")
    group = subprocess.Popen([honcho, *honcho_args], env=env)  # noqa: S603 (our own Procfile)
    for stop in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, lambda number, _frame: group.send_signal(number))
    try:
        returncode = group.wait()
    except KeyboardInterrupt:  # honcho has the Ctrl-C too (same process group)
        group.wait()
        return
    if returncode not in (0, -2, -15, 130, 143):  # not a Ctrl-C or a SIGTERM
        print(f"\n  {name} stopped: a process exited; its last lines above say why.\n", file=sys.stderr)
        sys.exit(returncode or 1)


if __name__ == "__main__":
    main()
