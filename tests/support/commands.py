"""Running a management command as a test would from a shell, and SQL as someone with the
database's password would (the tamper tests of the hash chains)."""

from __future__ import annotations

import io

from django.core.management import call_command
from django.db import connection


def command_exit(name: str, **options: str) -> tuple[int, str]:
    """The command's exit status and what it printed: its output, or its errors when it failed."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(name, stdout=out, stderr=err, **options)
    except SystemExit as exit_:
        return int(exit_.code or 0), err.getvalue()
    return 0, out.getvalue()


def sql(statement: str, *params: str | int | bool) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
