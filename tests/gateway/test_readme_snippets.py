"""The gateway guide's snippets (curl, openai, cloudflare, fetch) run as written against the gateway.

They were the README's until the README became a front door; the guide is docs/gateway.md.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.upstream import FakeUpstream
from tests.gateway.conftest import IssuedKey, records_written
from tests.support.browser import LiveApp

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "gateway.md"
SECTION = "## Send your application's traffic through the playground"


def _snippets() -> list[tuple[str, str]]:
    text = GUIDE.read_text()
    start = text.index(SECTION)
    section = text[start : text.index("\n## ", start + len(SECTION))]
    blocks = re.findall(r"```(sh|python|js)\n(.*?)```", section, flags=re.DOTALL)
    return [(language, code) for language, code in blocks if "manage.py" not in code]


def test_the_section_has_the_four_snippets() -> None:
    assert [language for language, _ in _snippets()] == ["sh", "python", "python", "js"]


@pytest.mark.parametrize("index", range(4))
def test_a_guide_snippet_runs_against_the_gateway(
    index: int, gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    language, code = _snippets()[index]
    env = {**os.environ, "PLAYGROUND_URL": gateway.url, "PLAYGROUND_API_KEY": gateway_key.secret}
    if language == "sh":
        command = ["bash", "-e", "-c", code]
    elif language == "python":
        command = [sys.executable, "-c", code]
    else:
        node = shutil.which("node")
        if node is None:
            pytest.skip("Node.js is not installed")
        script = tmp_path / "snippet.mjs"
        script.write_text(code)
        command = [node, str(script)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)

    assert done.returncode == 0, done.stderr
    assert fake_upstream.default_text.split()[0] in done.stdout
    (record,) = records_written(1)
    assert record.status == "ok" and record.api_key_id == gateway_key.key.pk
    if "x-session-affinity" in code:
        assert record.affinity_key == "checkout-42"
