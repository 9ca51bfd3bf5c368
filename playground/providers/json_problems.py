"""A problem found in a JSON document the user typed (tools, a response schema, an answer),
at a JSON path such as `$[0].function.parameters.properties.city.type`: one type for the
tools and the composer checks, which the panels show the same way, and the batch checks of
the same request fields (so it lives on this floor, below both features)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Issue:
    path: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


def json_path(parts: Iterable[str | int]) -> str:
    path = "$"
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part):
            path += f".{part}"
        else:
            path += f"[{json.dumps(part)}]"
    return path
