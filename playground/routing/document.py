"""A policy document, parsed: typed values the plan is made from (`routing.resolve`).

Parse only what `routing.validation` accepted: the schema guarantees every shape read here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from playground.routing.plan import DEFAULT_ON, Cooldown, Retries


@dataclass(frozen=True)
class TargetRef:
    """A target as the document names it: a connection by its name, and the model sent to it."""

    connection: str
    model: str
    weight: float = 1.0


@dataclass(frozen=True)
class Group:
    strategy: str  # single | weighted | fallback
    nodes: tuple[Node, ...]
    weight: float = 1.0


type Node = TargetRef | Group


@dataclass(frozen=True)
class When:
    models: tuple[str, ...] = ()
    tags_any: tuple[str, ...] = ()
    metadata: dict[str, Any] | None = None
    end_user: str | None = None
    prompt_tokens_above: int | None = None
    stream: bool | None = None
    budget_used_above: float | None = None


@dataclass(frozen=True)
class Rule:
    name: str
    when: When
    group: Group
    on: frozenset[int | str]
    fallback_on_budget: TargetRef | None
    retries: Retries | None


@dataclass(frozen=True)
class Policy:
    rules: tuple[Rule, ...] = ()
    aliases: dict[str, tuple[TargetRef, ...]] = field(default_factory=dict)
    retries: Retries = field(default_factory=Retries)
    cooldown: Cooldown = field(default_factory=Cooldown)
    auto_affinity: bool = True
    sticky_sessions: bool = False

    @property
    def needs_budget(self) -> bool:
        """Whether any rule looks at the budget used (read only then: it costs a query)."""
        return any(rule.when.budget_used_above is not None for rule in self.rules)


def policy_parse(document: dict[str, Any]) -> Policy:
    return Policy(
        rules=tuple(_rule(rule) for rule in document.get("rules", [])),
        aliases={
            name: tuple(_target(item) for item in (value if isinstance(value, list) else [value]))
            for name, value in document.get("aliases", {}).items()
        },
        retries=_retries(document.get("retries")) or Retries(),
        cooldown=Cooldown(**document["cooldown"]) if "cooldown" in document else Cooldown(),
        auto_affinity=document.get("auto_affinity", True),
        sticky_sessions=document.get("sticky_sessions", False),
    )


def _rule(rule: dict[str, Any]) -> Rule:
    when = rule.get("when", {})
    models = when.get("model", ())
    return Rule(
        name=rule["name"],
        when=When(
            models=(models,) if isinstance(models, str) else tuple(models),
            tags_any=tuple(when.get("tags_any", ())),
            metadata=when.get("metadata"),
            end_user=when.get("end_user"),
            prompt_tokens_above=when.get("prompt_tokens_above"),
            stream=when.get("stream"),
            budget_used_above=when.get("budget_used_above"),
        ),
        group=_group(rule),
        on=frozenset(rule["on"]) if "on" in rule else DEFAULT_ON,
        fallback_on_budget=_target(rule["when_budget_cannot_cover"])
        if "when_budget_cannot_cover" in rule
        else None,
        retries=_retries(rule.get("retries")),
    )


def _group(node: dict[str, Any]) -> Group:
    return Group(
        strategy=node.get("strategy", "fallback"),
        nodes=tuple(_group(item) if "strategy" in item else _target(item) for item in node["targets"]),
        weight=float(node.get("weight", 1.0)),
    )


def _target(node: dict[str, Any]) -> TargetRef:
    return TargetRef(
        connection=node["connection"], model=node["model"], weight=float(node.get("weight", 1.0))
    )


def _retries(value: dict[str, Any] | None) -> Retries | None:
    return Retries(**value) if value is not None else None


def target_refs(node: Node) -> list[TargetRef]:
    """Every target a node can reach, in document order."""
    if isinstance(node, TargetRef):
        return [node]
    return [ref for child in node.nodes for ref in target_refs(child)]
