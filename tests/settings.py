"""Fast settings for the test suite, on top of the real ones (embedded or services)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

# The services profile (DATABASE_URL) refuses to start without these shared secrets: the
# suite brings its own test-only values, which processes it starts (workers) inherit.
if os.environ.get("DATABASE_URL"):
    for _name in ("SECRET_KEY", "FIELD_ENCRYPTION_KEY"):
        if not os.environ.get(_name) and not os.environ.get(f"{_name}_FILE"):
            os.environ[_name] = f"test-only-{_name.lower()}-never-used-in-production"

# Metrics in multiprocess mode, as `make run` counts them, in a folder of this test process's own
# (set before prometheus_client is imported: it chooses how to store values then). The processes a
# test starts inherit it unless the test gives them their own.
os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="playground-test-metrics-")
atexit.register(shutil.rmtree, os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)

from playground.settings import *  # noqa: E402, F403

# Uploaded images never land in var/media; tests that look at files set their own tmp_path.
MEDIA_ROOT = Path(tempfile.gettempdir()) / "playground-test-media"

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
CELERY_TASK_ALWAYS_EAGER = True
# Tests point connections at loopback fake upstreams.
PROVIDER_HOST_ALLOWLIST = ["127.0.0.1", "localhost"]
UPSTREAM_MAX_RETRY_AFTER = 1.0
# No engine unless a test starts one (and points ENGINE_URL at it): the default address is the
# one `make run` serves on, and a developer's running engine there answered the suite's "is this
# model served?" questions, failing tests that expect no engine. Port 9 (discard) refuses.
ENGINE_URL = "http://127.0.0.1:9"
# Serve static files straight from the finders: no collectstatic before the tests.
SERVESTATIC_USE_FINDERS = True
SERVESTATIC_AUTOREFRESH = True

# SQLite's test database is a file (WAL, as the app's own), not Django's default in-memory one:
# with a shared cache in memory, a connection that touched a table another connection was
# writing failed at once ("database table is locked") instead of waiting, and the live server's
# requests (the pre-flight line on every keystroke, the gateway's record written after its
# answer) run in threads of their own beside the test's. On the file, readers see the last
# commit and writers wait for each other (the busy timeout), as in the app.
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    DATABASES["default"]["TEST"] = {  # noqa: F405
        "NAME": str(Path(tempfile.gettempdir()) / f"playground-test-{os.getpid()}.sqlite3")
    }
