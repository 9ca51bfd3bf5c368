"""`python -m playground.engine` starts a process of its own: no Django, no Celery.

The engine runs beside the web app and the worker (`make run`'s Procfile) and is meant to be
deployable without them. import-linter checks the engine's own modules (`make lint`); this
runs the real entry path, the `playground` package's `__init__` included, and records who
imports what.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Runs `python -m playground.engine --model <missing>` with every import statement recorded
# (cached ones too, so an import after a third party's is still seen), then prints who
# imported each watched package. main() reads its config, then stops before the model loads.
SPY = """
import builtins, json, runpy, sys

WATCHED = {"django", "celery", "kombu", "uvicorn"}
importers = {name: set() for name in WATCHED}
real_import = builtins.__import__

def spy(name, globals=None, locals=None, fromlist=(), level=0):
    top = name.split(".")[0]
    importer = (globals or {}).get("__name__", "?")
    if level == 0 and top in WATCHED and importer.split(".")[0] != top:
        importers[top].add(importer)
    return real_import(name, globals, locals, fromlist, level)

builtins.__import__ = spy
sys.argv = ["playground.engine", "--model", sys.argv[1]]
try:
    runpy.run_module("playground.engine", run_name="__main__", alter_sys=True)
except SystemExit as stop:
    code = stop.code
print(json.dumps({"exit": code, "importers": {k: sorted(v) for k, v in importers.items()}}))
"""

# llama-cpp-python imports diskcache, whose optional DjangoCache imports Django's cache base
# class whenever Django is installed in the same environment. No settings, no apps: a
# library's import, not the project's.
THIRD_PARTY_DJANGO_IMPORTERS = {"diskcache.djangocache"}


def test_starting_the_engine_imports_neither_django_nor_celery(tmp_path: Path) -> None:
    missing = tmp_path / "missing.gguf"

    started = subprocess.run(
        [sys.executable, "-c", SPY, str(missing)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert started.returncode == 0, started.stderr[-3000:]
    seen = json.loads(started.stdout.splitlines()[-1])
    assert seen["exit"] == 1
    assert f"The engine cannot start. The model file {missing} does not exist." in started.stderr
    assert "__main__" in seen["importers"]["uvicorn"]  # the spy sees the entry module's imports
    assert set(seen["importers"]["django"]) - THIRD_PARTY_DJANGO_IMPORTERS == set()
    assert seen["importers"]["celery"] == []
    assert seen["importers"]["kombu"] == []
