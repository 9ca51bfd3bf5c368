"""Every relative link in README.md and docs/ reaches a file, and a `#fragment` a heading there.

The README is a front door into docs/; pages moved out of it link to each other by heading.
A renamed heading or a moved page would leave a dead link that no reader reports, so the
links are checked as GitHub resolves them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
SCHEME = re.compile(r"[a-z][a-z0-9+.-]*:")  # http:, https:, mailto: ... leave the repository


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code, where a bracket is not a link."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(page: Path) -> set[str]:
    """The fragments GitHub gives the page's headings (lower case, punctuation dropped,
    spaces as hyphens, a repeated heading numbered)."""
    seen: dict[str, int] = {}
    found = set()
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.MULTILINE | re.DOTALL)
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(page: Path) -> list[str]:
    return [target for target in LINK.findall(prose(page.read_text())) if not SCHEME.match(target)]


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no such heading")

    assert broken == []


def test_the_checker_sees_the_readme_links_and_headings() -> None:
    """Guards the checker: a pattern that matched nothing would pass every page."""
    assert "docs/install.md" in relative_links(ROOT / "README.md")
    assert "the-production-profile-postgresql-and-redis" in anchors(ROOT / "docs" / "install.md")
    assert "catalogue--prices" in anchors(ROOT / "docs" / "guide" / "teams.md")
