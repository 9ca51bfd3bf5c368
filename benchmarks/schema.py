"""The benchmarks' `migrate`, which can start from a migrated SQLite copy.

Migrating an empty database costs ~10 s of CPU (Django rendering the models' intermediate
states), more than most smoke runs spend measuring. The suite's smoke runs
(`tests/benchmarks/test_smoke.py`) name the test run's migrated copy in `BENCH_SQLITE_TEMPLATE`;
a benchmark about to migrate a new SQLite file starts from it instead, and `migrate` then finds
nothing to apply. Without the variable, on PostgreSQL or on a database that already holds
tables, `migrate` runs as it always did.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

TEMPLATE_VARIABLE = "BENCH_SQLITE_TEMPLATE"


def database_migrated() -> None:
    """`migrate` the default database (Django is set up), from the template when one is named."""
    from django.core.management import call_command
    from django.db import connection

    template = os.environ.get(TEMPLATE_VARIABLE)
    if template and connection.vendor == "sqlite":
        target = Path(connection.settings_dict["NAME"])
        if not target.exists() or target.stat().st_size == 0:
            connection.close()
            shutil.copyfile(template, target)
    call_command("migrate", "--noinput", verbosity=0)
