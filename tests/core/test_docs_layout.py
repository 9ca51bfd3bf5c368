"""The layout table in docs/architecture.md names every app, entry point and `lib` module.

The table is the map a newcomer reads first; the README's old one went stale (no gateway, no
presets, half of `lib`) because nothing noticed. This reads the code's own tree, so a new app
or `lib` module fails here until it has its line, and a line for something removed fails too.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "playground"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
SECTION = "## Layout"


def layout_paths() -> set[str]:
    """The first column of the layout section's table, without backticks or a trailing slash."""
    text = ARCHITECTURE.read_text()
    start = text.index(f"\n{SECTION}\n")
    end = text.find("\n## ", start + len(SECTION))
    section = text[start : end if end != -1 else len(text)]
    cells = re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE)
    return {cell.rstrip("/") for cell in cells}


def apps() -> set[str]:
    """Each package directly under playground/: the apps and the engine."""
    return {f"playground/{d.name}" for d in PACKAGE.iterdir() if (d / "__init__.py").is_file()}


def entry_points() -> set[str]:
    """The modules at the top of the package: settings, urls, asgi, celery, devrun, __init__."""
    return {f"playground/{f.name}" for f in PACKAGE.glob("*.py")}


def lib_modules() -> set[str]:
    return {f"playground/lib/{f.name}" for f in (PACKAGE / "lib").glob("*.py") if f.name != "__init__.py"}


def test_every_app_under_playground_has_a_line() -> None:
    assert apps() - layout_paths() == set()


def test_every_entry_point_at_the_top_of_the_package_has_a_line() -> None:
    assert entry_points() - layout_paths() == set()


def test_every_lib_module_has_a_line() -> None:
    assert lib_modules() - layout_paths() == set()


def test_every_line_of_the_table_names_something_that_exists() -> None:
    missing = {path for path in layout_paths() if not (ROOT / path).exists()}

    assert missing == set()


def test_the_reader_finds_the_table() -> None:
    """Guards the reader itself: a table it could not parse would make the tests above vacuous."""
    paths = layout_paths()

    assert {"playground/chat", "playground/lib/env.py", "playground/settings.py"} <= paths
    assert len(apps()) >= 10 and len(lib_modules()) >= 8


def test_the_readme_stays_a_front_door() -> None:
    """Issue 34: the README grew to 720 lines of manual; the manual is docs/ now. It keeps the
    two commands (CI checks that .ci/run calls its test command) and at most 150 lines."""
    readme = (ROOT / "README.md").read_text()

    assert len(readme.splitlines()) <= 150
    assert "make run" in readme and "make test" in readme
