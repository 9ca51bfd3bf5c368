"""The settings pick embedded defaults with nothing set and services when told to."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PROBE = (
    "import json; from django.conf import settings as s; import django; django.setup(); "
    "print(json.dumps({'db': s.DATABASES['default']['ENGINE'], "
    "'layer': s.CHANNEL_LAYERS['default']['BACKEND'], 'broker': s.CELERY_BROKER_URL, "
    "'cache': s.CACHES['default']['BACKEND'], 'https': [s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
    "s.SECURE_HSTS_SECONDS, s.SECURE_PROXY_SSL_HEADER]}))"
)


def _settings_with(env: dict[str, str], data_dir: Path) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "HTTPS"}}
    clean |= {"DJANGO_SETTINGS_MODULE": "playground.settings", "PLAYGROUND_DATA_DIR": str(data_dir), **env}
    out = subprocess.run([sys.executable, "-c", PROBE], env=clean, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_it_runs_embedded_with_nothing_set(tmp_path: Path) -> None:
    found = _settings_with({}, tmp_path)
    assert found == {
        "db": "django.db.backends.sqlite3",
        "layer": "channels.layers.InMemoryChannelLayer",
        "broker": "filesystem://localhost/",
        "cache": "django.core.cache.backends.locmem.LocMemCache",
        "https": [False, False, 0, None],
    }
    assert (tmp_path / "secret_key").exists()


def test_it_uses_postgres_and_redis_when_their_urls_are_set(tmp_path: Path) -> None:
    found = _settings_with(
        {"DATABASE_URL": "postgres://u@127.0.0.1:5432/x", "REDIS_URL": "redis://127.0.0.1:6379/3"}, tmp_path
    )
    assert found == {
        "db": "django.db.backends.postgresql",
        "layer": "channels_redis.core.RedisChannelLayer",
        "broker": "redis://127.0.0.1:6379/3",
        "cache": "django.core.cache.backends.redis.RedisCache",
        "https": [True, True, 31_536_000, ["HTTP_X_FORWARDED_PROTO", "https"]],
    }


def test_the_production_profile_can_be_served_over_plain_http_when_told(tmp_path: Path) -> None:
    found = _settings_with({"DATABASE_URL": "postgres://u@127.0.0.1:5432/x", "HTTPS": "false"}, tmp_path)
    assert found["https"] == [False, False, 0, None]


def test_the_embedded_broker_connects_without_a_warning(tmp_path: Path) -> None:
    """With no host in its URL kombu logged "No hostname was supplied" each time a batch step
    was enqueued, in the terminal of `make run`."""
    probe = (
        "import django; django.setup(); from playground.celery import app; "
        "connection = app.connection_for_write(); connection.default_channel; print(connection.as_uri())"
    )
    clean = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    clean |= {"DJANGO_SETTINGS_MODULE": "playground.settings", "PLAYGROUND_DATA_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", probe], env=clean, capture_output=True, text=True, check=True)
    assert out.stdout.strip().startswith("filesystem://")
    assert "No hostname" not in out.stderr + out.stdout
