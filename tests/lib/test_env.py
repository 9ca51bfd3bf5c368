from __future__ import annotations

from pathlib import Path

import pytest

from playground.lib.env import (
    ImproperlyConfiguredEnv,
    env_bool,
    env_int,
    env_list,
    env_secret,
    persistent_secret,
)


def test_env_bool_reads_common_spellings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLAG", "yes")
    assert env_bool("FLAG") is True
    monkeypatch.setenv("FLAG", "off")
    assert env_bool("FLAG", default=True) is False


def test_env_bool_fails_loudly_on_nonsense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLAG", "maybe")
    with pytest.raises(ImproperlyConfiguredEnv, match="FLAG must be a boolean"):
        env_bool("FLAG")


def test_env_int_fails_loudly_on_nonsense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COUNT", "ten")
    with pytest.raises(ImproperlyConfiguredEnv, match="COUNT must be an integer"):
        env_int("COUNT", 1)


def test_env_list_drops_blanks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTS", "a, ,b,")
    assert env_list("HOSTS") == ["a", "b"]


def test_env_secret_reads_a_file_when_name_file_is_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret_file = tmp_path / "token"
    secret_file.write_text("s3cret\n")
    monkeypatch.delenv("API_TOKEN", raising=False)
    monkeypatch.setenv("API_TOKEN_FILE", str(secret_file))
    assert env_secret("API_TOKEN") == "s3cret"


def test_env_secret_fails_loudly_on_a_missing_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("API_TOKEN", raising=False)
    monkeypatch.setenv("API_TOKEN_FILE", str(tmp_path / "absent"))
    with pytest.raises(ImproperlyConfiguredEnv, match="cannot be read"):
        env_secret("API_TOKEN")


def test_persistent_secret_is_generated_once_and_reused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("SOME_KEY", raising=False)
    path = tmp_path / "some_key"
    first = persistent_secret("SOME_KEY", path)
    assert len(first) >= 40
    assert persistent_secret("SOME_KEY", path) == first
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    monkeypatch.setenv("SOME_KEY", "from-env")
    assert persistent_secret("SOME_KEY", path) == "from-env"
