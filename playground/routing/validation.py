"""Whether a policy document may be put in force: the published schema, then the team's facts.

Every problem is reported at its JSON path, all at once, so a user fixes them in one pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import best_match

from playground.providers.connection_check import connection_models_served
from playground.providers.models import ProviderConnection
from playground.routing.problems import PolicyProblem
from playground.routing.schema import POLICY_SCHEMA

_validator = Draft202012Validator(POLICY_SCHEMA)


def document_load(document: object) -> tuple[dict[str, Any] | None, list[PolicyProblem]]:
    """The document as a JSON object, from JSON text or a parsed value, with the schema's problems."""
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except json.JSONDecodeError as exc:
            return None, [
                PolicyProblem("$", f"Not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}.")
            ]
    problems = [_problem(error) for error in sorted(_validator.iter_errors(document), key=_error_order)]
    if problems or not isinstance(document, dict):
        return None, problems
    return document, []


def document_team_problems(document: dict[str, Any], *, team_id: int) -> list[PolicyProblem]:
    """Beyond the schema: rule names unique, aliases that do not chain, every connection the
    team's, every model served."""
    connections = {
        connection.name: connection for connection in ProviderConnection.objects.filter(team_id=team_id)
    }
    served: dict[str, list[str] | None] = {}
    problems: list[PolicyProblem] = []
    seen: dict[str, int] = {}
    for index, rule in enumerate(document.get("rules", [])):
        if rule["name"] in seen:
            problems.append(
                PolicyProblem(
                    f"$.rules[{index}].name",
                    f"{rule['name']!r} is already the name of rule {seen[rule['name']]}.",
                )
            )
        seen.setdefault(rule["name"], index)
    problems += _alias_problems(document.get("aliases", {}))
    for at in document_target_paths(document):
        path, ref = at.path, at.ref
        connection = connections.get(ref["connection"])
        if connection is None:
            known = ", ".join(sorted(connections)) or "none yet"
            problems.append(
                PolicyProblem(
                    f"{path}.connection",
                    f"The team has no connection named {ref['connection']!r} (its connections: {known}).",
                )
            )
            continue
        if connection.name not in served:
            served[connection.name] = connection_models_served(connection)
        models = served[connection.name]
        if models is not None and ref["model"] not in models:
            problems.append(
                PolicyProblem(f"{path}.model", f"{connection.name} does not serve {ref['model']!r}.")
            )
    return problems


def _alias_problems(aliases: dict[str, Any]) -> list[PolicyProblem]:
    """An alias's target names a model sent upstream as it is, never another alias: a target
    naming an alias (itself included) would send the alias's name to the connection, so it is a
    chain or a loop the gateway does not follow."""
    problems = []
    for name, value in aliases.items():
        items = value if isinstance(value, list) else [value]
        for index, item in enumerate(items):
            if item["model"] not in aliases:
                continue
            path = f"$.aliases[{json.dumps(name)}]" + (f"[{index}]" if isinstance(value, list) else "")
            what = "itself" if item["model"] == name else f"the alias {item['model']!r}"
            problems.append(
                PolicyProblem(
                    f"{path}.model",
                    f"The alias {name!r} names {what}: aliases do not chain; name the model its "
                    "connection serves.",
                )
            )
    return problems


@dataclass(frozen=True)
class TargetAt:
    """A target the document names, where: its JSON path and who names it ("Rule 'x'")."""

    path: str
    owner: str
    ref: dict[str, Any]


def document_target_paths(document: dict[str, Any]) -> Iterator[TargetAt]:
    """Every target a document names (rules' groups, budget fallbacks, aliases), in order."""
    for index, rule in enumerate(document.get("rules", [])):
        owner = f"Rule {rule['name']!r}"
        for path, ref in _node_paths(rule, f"$.rules[{index}]"):
            yield TargetAt(path, owner, ref)
        if "when_budget_cannot_cover" in rule:
            yield TargetAt(
                f"$.rules[{index}].when_budget_cannot_cover", owner, rule["when_budget_cannot_cover"]
            )
    for name, value in document.get("aliases", {}).items():
        path, owner = f"$.aliases[{json.dumps(name)}]", f"The alias {name!r}"
        if isinstance(value, list):
            for index, item in enumerate(value):
                yield TargetAt(f"{path}[{index}]", owner, item)
        else:
            yield TargetAt(path, owner, value)


def _node_paths(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for index, child in enumerate(node["targets"]):
        child_path = f"{path}.targets[{index}]"
        if "strategy" in child:
            yield from _node_paths(child, child_path)
        else:
            yield child_path, child


def _problem(error: ValidationError) -> PolicyProblem:
    if error.context:  # anyOf / if-then: the branch that came closest says what is wrong
        error = best_match(error.context)
    return PolicyProblem(error.json_path, error.message)


def _error_order(error: ValidationError) -> tuple[str, ...]:
    return tuple(str(part) for part in error.absolute_path)
