"""What can be wrong with a policy, each problem at its JSON path, and a route that cannot run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PolicyProblem:
    path: str  # a JSON path into the document: "$.rules[0].targets[1].model"
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class PolicyInvalid(Exception):
    """The document was refused: nothing was saved and the version in force stays."""

    def __init__(self, problems: list[PolicyProblem]) -> None:
        super().__init__("; ".join(str(problem) for problem in problems))
        self.problems = problems


class RouteUnavailable(Exception):
    """A matching rule names a connection that no longer exists: the request cannot be routed."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule
