"""The Variables drawer: a conversation's prompt variables, and the placeholders that are not yet."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from playground.presets.variables import TYPES, Variable, placeholder_names, variables_read

TYPE_LABELS = {"text": "Text", "number": "Number", "json": "JSON"}


@dataclass(frozen=True)
class VariableRow:
    index: int
    variable: Variable
    used: bool  # a text of the branch (or the system prompt) uses it
    errors: Mapping[str, list[str]] = field(default_factory=dict)  # by field: name, type, value


@dataclass(frozen=True)
class VariablesPanel:
    rows: list[VariableRow]
    undeclared: list[str]  # placeholders of the texts that are not variables: sent as written
    errors: list[str] = field(default_factory=list)  # the panel's own (e.g. a viewer saving)
    saved: bool = False
    types: Sequence[tuple[str, str]] = tuple((name, TYPE_LABELS[name]) for name in TYPES)

    @property
    def unfilled(self) -> list[str]:
        return [row.variable.name for row in self.rows if row.used and not row.variable.value.strip()]

    @property
    def summary(self) -> str:
        if not self.rows:
            return "none" + (
                f" · {len(self.undeclared)} placeholder{'s' * (len(self.undeclared) > 1)} not declared"
                if self.undeclared
                else ""
            )
        names = ", ".join(row.variable.name for row in self.rows[:3]) + (" …" if len(self.rows) > 3 else "")
        missing = len(self.unfilled)
        return names + (f" · {missing} to fill" if missing else "")

    @property
    def has_row_errors(self) -> bool:
        return any(row.errors for row in self.rows)


def variables_panel(
    *,
    variables: object,
    texts: Iterable[str],
    errors: Mapping[str, list[str]] | None = None,
    saved: bool = False,
) -> VariablesPanel:
    """The drawer for stored (or just submitted) `variables`, knowing which the `texts` use.

    `errors` as `conversation_variables_update` raises them: keyed `<field>-<row>` or `__all__`."""
    errors = errors or {}
    used = placeholder_names(texts)
    declared = variables_read(variables)
    names = {variable.name for variable in declared}
    rows = [
        VariableRow(
            index=index,
            variable=variable,
            used=variable.name in used,
            errors={
                name: errors[f"{name}-{index}"]
                for name in ("name", "type", "value")
                if f"{name}-{index}" in errors
            },
        )
        for index, variable in enumerate(declared)
    ]
    return VariablesPanel(
        rows=rows,
        undeclared=[name for name in used if name not in names],
        errors=list(errors.get("__all__", [])),
        saved=saved,
    )
