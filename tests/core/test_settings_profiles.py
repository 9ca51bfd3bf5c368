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


SECRETS = ("SECRET_KEY", "FIELD_ENCRYPTION_KEY")
# What the production profile needs besides its URLs.
PRODUCTION_SECRETS = {"SECRET_KEY": "a-shared-secret-key", "FIELD_ENCRYPTION_KEY": "a-shared-encryption-key"}
POSTGRES = "postgres://u@127.0.0.1:5432/x"


def _probe(env: dict[str, str], data_dir: Path, code: str = PROBE) -> subprocess.CompletedProcess[str]:
    """Run `code` with the real settings and only `env` set of what picks the profile."""
    ours = {"DATABASE_URL", "REDIS_URL", "HTTPS", *SECRETS, *(f"{name}_FILE" for name in SECRETS)}
    clean = {k: v for k, v in os.environ.items() if k not in ours}
    clean |= {"DJANGO_SETTINGS_MODULE": "playground.settings", "PLAYGROUND_DATA_DIR": str(data_dir), **env}
    return subprocess.run([sys.executable, "-c", code], env=clean, capture_output=True, text=True)


def _settings_with(env: dict[str, str], data_dir: Path) -> dict[str, object]:
    out = _probe(env, data_dir)
    assert out.returncode == 0, out.stderr
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
    assert (tmp_path / "field_encryption_key").exists()


def test_it_uses_postgres_and_redis_when_their_urls_are_set(tmp_path: Path) -> None:
    found = _settings_with(
        {"DATABASE_URL": POSTGRES, "REDIS_URL": "redis://127.0.0.1:6379/3", **PRODUCTION_SECRETS}, tmp_path
    )
    assert found == {
        "db": "django.db.backends.postgresql",
        "layer": "channels_redis.core.RedisChannelLayer",
        "broker": "redis://127.0.0.1:6379/3",
        "cache": "django.core.cache.backends.redis.RedisCache",
        "https": [True, True, 31_536_000, ["HTTP_X_FORWARDED_PROTO", "https"]],
    }


def test_the_production_profile_can_be_served_over_plain_http_when_told(tmp_path: Path) -> None:
    found = _settings_with({"DATABASE_URL": POSTGRES, "HTTPS": "false", **PRODUCTION_SECRETS}, tmp_path)
    assert found["https"] == [False, False, 0, None]


def test_the_production_profile_refuses_to_start_without_its_secrets_naming_them(tmp_path: Path) -> None:
    """Generated per host, two web hosts would each mint their own encryption key and could
    not read the provider tokens the other saved."""
    out = _probe({"DATABASE_URL": POSTGRES}, tmp_path)

    assert out.returncode != 0
    message = out.stderr.strip().splitlines()[-1]
    assert "SECRET_KEY and FIELD_ENCRYPTION_KEY are not set" in message
    assert "python3 -c 'import secrets; print(secrets.token_urlsafe(48))'" in message
    assert not (tmp_path / "secret_key").exists() and not (tmp_path / "field_encryption_key").exists()


def test_the_production_profile_names_only_the_secret_that_is_missing(tmp_path: Path) -> None:
    out = _probe({"DATABASE_URL": POSTGRES, "SECRET_KEY": "a-shared-secret-key"}, tmp_path)

    assert out.returncode != 0
    message = out.stderr.strip().splitlines()[-1]
    assert message.endswith("secrets.token_urlsafe(48))'")
    assert "FIELD_ENCRYPTION_KEY is not set" in message and "SECRET_KEY and" not in message


def test_the_production_profile_reads_its_secrets_from_files(tmp_path: Path) -> None:
    for name in SECRETS:
        (tmp_path / f"{name}.txt").write_text(f"{name}-from-a-mounted-file\n")
    env = {"DATABASE_URL": POSTGRES} | {f"{name}_FILE": str(tmp_path / f"{name}.txt") for name in SECRETS}
    code = (
        "from django.conf import settings as s; import django; django.setup(); "
        "print(s.SECRET_KEY, s.FIELD_ENCRYPTION_KEY)"
    )

    out = _probe(env, tmp_path / "data", code)

    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [
        "SECRET_KEY-from-a-mounted-file",
        "FIELD_ENCRYPTION_KEY-from-a-mounted-file",
    ]
    assert not (tmp_path / "data" / "secret_key").exists()


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
