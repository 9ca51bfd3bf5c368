"""Typed readers for settings that come from the environment.

Every reader fails loudly on a malformed value instead of silently falling back, and
secrets are read only through `env_secret`, which also accepts `NAME_FILE` (a path whose
contents are the secret) so containers can mount secrets as files.
"""

from __future__ import annotations

import os
from pathlib import Path


class ImproperlyConfiguredEnv(ValueError):
    """An environment variable is set to a value we cannot use."""


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfiguredEnv(f"{name} must be a boolean (true/false), got {raw!r}")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfiguredEnv(f"{name} must be an integer, got {raw!r}") from exc


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ImproperlyConfiguredEnv(f"{name} must be a number, got {raw!r}") from exc


def env_list(name: str) -> list[str]:
    """A comma-separated list; blanks are dropped."""
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def env_secret(name: str, default: str = "") -> str:
    """The secret in `NAME`, or the contents of the file named by `NAME_FILE`."""
    value = os.environ.get(name)
    if value:
        return value
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfiguredEnv(f"{name}_FILE points at {path!r}, which cannot be read") from exc
    return default


def persistent_secret(name: str, path: Path) -> str:
    """`env_secret(name)`, else a random value kept in `path` so restarts reuse it.

    Embedded (laptop) runs need a stable SECRET_KEY and encryption key without asking the
    user to invent one; production sets the variable and the file is never written.
    """
    value = env_secret(name)
    if value:
        return value
    if path.exists():
        return path.read_text().strip()
    import secrets

    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(48)
    path.write_text(value)
    path.chmod(0o600)
    return value
