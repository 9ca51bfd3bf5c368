"""The Celery app is configured from Django settings, durably (no task lost to a dying worker),
and is the one every Django process and the worker use."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from playground.celery import app

REPO = Path(__file__).resolve().parents[2]


def test_it_takes_its_broker_from_the_settings(settings: Any) -> None:
    assert app.conf.broker_url == settings.CELERY_BROKER_URL


def test_it_acknowledges_tasks_only_after_running_them() -> None:
    assert app.conf.task_acks_late is True
    assert app.conf.task_reject_on_worker_lost is True
    assert app.conf.task_time_limit > app.conf.task_soft_time_limit > 0


def _run_with_real_settings(code: str, data_dir: Path) -> list[object]:
    """Run `code` in a fresh interpreter on the embedded profile; it prints one JSON line."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env |= {"DJANGO_SETTINGS_MODULE": "playground.settings", "PLAYGROUND_DATA_DIR": str(data_dir)}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_django_process_enqueues_shared_tasks_on_the_app_configured_from_the_settings(
    tmp_path: Path,
) -> None:
    """The package `__init__` no longer builds the app (the engine must not), so a web process
    that never names `playground.celery` must still get it: else `batch_step.delay` would go
    to Celery's default app and its default broker, and no batch would run."""
    probe = (
        "import json, django; django.setup(); from django.conf import settings; "
        "from playground.batches.tasks import batch_step; bound = batch_step.app; "
        "print(json.dumps([bound.main, bound.conf.broker_url == settings.CELERY_BROKER_URL]))"
    )

    assert _run_with_real_settings(probe, tmp_path) == ["playground", True]


def test_the_worker_finds_the_app_and_the_batch_tasks_by_the_name_in_the_procfile(tmp_path: Path) -> None:
    worker_app = re.search(r"celery -A (\S+) worker", (REPO / "Procfile").read_text())
    assert worker_app is not None
    probe = (
        "import json; from celery.app.utils import find_app; "
        f"app = find_app({worker_app[1]!r}); app.loader.import_default_modules(); "
        "print(json.dumps([app.main, sorted(name for name in app.tasks if name.startswith('playground.'))]))"
    )

    assert _run_with_real_settings(probe, tmp_path) == [
        "playground",
        [
            "playground.alerts.tasks.alert_deliver",
            "playground.alerts.tasks.alerts_evaluate_all",
            "playground.batches.tasks.batch_step",
            "playground.batches.tasks.batch_watch",
            "playground.batches.tasks.batches_resume",
            "playground.evals.tasks.experiment_target_score",
            "playground.gateway.tasks.idempotency_answers_expire",
            "playground.usage.tasks.budget_alert_email",
            "playground.usage.tasks.retention_sweep",
            "playground.usage.tasks.routing_decisions_seal",
        ],
    ]


def test_the_beat_in_the_procfile_finds_every_scheduled_task(tmp_path: Path) -> None:
    beat_app = re.search(r"celery -A (\S+) beat", (REPO / "Procfile").read_text())
    assert beat_app is not None
    probe = (
        "import json; from celery.app.utils import find_app; "
        f"app = find_app({beat_app[1]!r}); app.loader.import_default_modules(); "
        "scheduled = sorted(entry['task'] for entry in app.conf.beat_schedule.values()); "
        "print(json.dumps([scheduled, [name for name in scheduled if name not in app.tasks]]))"
    )

    scheduled, missing = _run_with_real_settings(probe, tmp_path)
    assert isinstance(scheduled, list) and "playground.usage.tasks.retention_sweep" in scheduled
    assert "playground.usage.tasks.routing_decisions_seal" in scheduled
    assert missing == []
