"""`make run-production`: the production layout on one host, on PostgreSQL and Redis.

Refuses to start without `DATABASE_URL` and `REDIS_URL` (N processes share budgets, rate limits,
idempotency, cooldowns and the chat relay only through them). Migrates once and collects static
files, empties the metrics folder the processes count into, then hands `Procfile.production` to
honcho: `WEB_CONCURRENCY` web processes (default: one per core), each on its own port from
`APP_PORT` up, `WORKER_CONCURRENCY` Celery workers (default 1), one beat, and the engine when
`ENGINE_PROCESS=1`. No demo login is made: users come from `manage.py createsuperuser`, invitations
or single sign-on. A SIGTERM stops every process (docs/deploy.md).
"""

from __future__ import annotations

import os
import sys
import threading
import time

import django

from playground.devrun import manage, processes_env, supervise, web_ready

REQUIRED = ("DATABASE_URL", "REDIS_URL")


def _count(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    try:
        count = int(raw) if raw else default
    except ValueError:
        sys.exit(f"{name} must be a whole number, not {raw!r}")
    if count < 0:
        sys.exit(f"{name} must be 0 or more, not {count}")
    return count


def _announce_when_ready(urls: list[str]) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if all(web_ready(url) for url in urls):
            listed = "\n".join(f"    {url}" for url in urls)
            print(
                f"\n  {len(urls)} web processes answer (put a reverse proxy in front):\n{listed}\n",
                flush=True,
            )
            return
        time.sleep(0.5)


def main() -> None:
    missing = [name for name in REQUIRED if not os.environ.get(name)]
    if missing:
        sys.exit(
            f"make run-production needs {' and '.join(missing)}: its processes share budgets, rate "
            "limits, sessions and the chat relay through PostgreSQL and Redis (docs/deploy.md)."
        )
    web = _count("WEB_CONCURRENCY", os.cpu_count() or 1)
    workers = _count("WORKER_CONCURRENCY", 1)
    engine = _count("ENGINE_PROCESS", 0)
    if web < 1:
        sys.exit("WEB_CONCURRENCY must be 1 or more")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
    django.setup()
    from django.conf import settings

    manage("migrate", "--noinput", "-v", "0")
    manage("collectstatic", "--noinput", "-v", "0")
    env = processes_env() | {"BEAT_SCHEDULE": str(settings.DATA_DIR / "celerybeat-schedule")}
    first = int(env["APP_PORT"])
    urls = [f"http://{env['APP_HOST']}:{first + index}/" for index in range(web)]
    threading.Thread(target=_announce_when_ready, args=(urls,), daemon=True).start()
    concurrency = f"web={web},worker={workers},beat=1,engine={min(engine, 1)}"
    supervise(
        ["start", "-f", "Procfile.production", "-p", str(first), "-c", concurrency],
        env=env,
        name="make run-production",
    )


if __name__ == "__main__":
    main()
