"""JSON values as `json.loads` returns them, for data whose shape is genuinely open.

Shapes the code knows (a tool call, a batch estimate, a queue response) have their own
TypedDicts or dataclasses next to the code that builds them; these aliases are for the rest:
request bodies passed through, model outputs, results stored as received. Nested values are
read-only (`Sequence`, `Mapping`) so that a `list[JSONObject]` is a JSON value too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

type JSONValue = str | int | float | bool | Sequence[JSONValue] | Mapping[str, JSONValue] | None
type JSONObject = dict[str, JSONValue]
