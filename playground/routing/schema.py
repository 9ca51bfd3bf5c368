"""The routing policy's published JSON Schema (Draft 2020-12): what a document may say.

`docs/routing-policy.schema.json` is this dict written out (a test keeps the two the same), so
the schema users read and editors check against is the one `routing.validation` enforces.
"""

from __future__ import annotations

from typing import Any

RULE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$"
MOVE_ON = {
    "description": "What moves a fallback to its next target: HTTP statuses, timeouts before the first "
    "byte, and upstreams that could not be reached.",
    "type": "array",
    "items": {
        "anyOf": [
            {"type": "integer", "minimum": 400, "maximum": 599},
            {"enum": ["timeout", "connect_error"]},
        ]
    },
    "uniqueItems": True,
}

POLICY_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "urn:playground:routing-policy:1",
    "title": "Routing policy",
    "description": "A team's routing policy: the first rule whose `when` matches a gateway request decides "
    "its targets; no match sends it to its key's connection.",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "rules": {"type": "array", "items": {"$ref": "#/$defs/rule"}},
        "aliases": {
            "description": "Model names clients send, each mapped to a target or to a list of targets "
            "tried in order.",
            "type": "object",
            "propertyNames": {"minLength": 1, "maxLength": 200},
            "additionalProperties": {
                "anyOf": [
                    {"$ref": "#/$defs/target"},
                    {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/target"}},
                ]
            },
        },
        "retries": {"$ref": "#/$defs/retries"},
        "cooldown": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "failures": {"type": "integer", "minimum": 1, "maximum": 100},
                "seconds": {"type": "number", "minimum": 1, "maximum": 3600},
            },
        },
        "auto_affinity": {
            "description": "Add an affinity key derived from team and session to a request that names a "
            "session (x-playground-session) but sends no x-session-affinity.",
            "type": "boolean",
        },
        "sticky_sessions": {
            "description": "A session's later requests go to the target its first one used while that "
            "target is healthy.",
            "type": "boolean",
        },
    },
    "$defs": {
        "target": {
            "type": "object",
            "required": ["connection", "model"],
            "additionalProperties": False,
            "properties": {
                "connection": {"type": "string", "minLength": 1, "maxLength": 120},
                "model": {"type": "string", "minLength": 1, "maxLength": 200},
                "weight": {"type": "number", "exclusiveMinimum": 0},
            },
        },
        "group": {
            "type": "object",
            "required": ["strategy", "targets"],
            "additionalProperties": False,
            "properties": {
                "strategy": {"enum": ["single", "weighted", "fallback"]},
                "targets": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/node"}},
                "weight": {"type": "number", "exclusiveMinimum": 0},
            },
        },
        "node": {
            "if": {"type": "object", "required": ["strategy"]},
            "then": {"$ref": "#/$defs/group"},
            "else": {"$ref": "#/$defs/target"},
        },
        "retries": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "attempts": {"type": "integer", "minimum": 1, "maximum": 10},
                "backoff_ms": {"type": "integer", "minimum": 0, "maximum": 60000},
                "max_retry_after_s": {"type": "number", "minimum": 0, "maximum": 300},
            },
        },
        "when": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "model": {
                    "description": "The model name the client sent (an alias or a model id), or a list.",
                    "anyOf": [
                        {"type": "string", "minLength": 1},
                        {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
                    ],
                },
                "tags_any": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
                "metadata": {
                    "description": "Every key must be in x-playground-metadata with this value.",
                    "type": "object",
                },
                "end_user": {"type": "string", "minLength": 1},
                "prompt_tokens_above": {"type": "integer", "minimum": 0},
                "stream": {"type": "boolean"},
                "budget_used_above": {
                    "description": "The share (0 to 1) of the tightest monthly budget, the team's, the "
                    "key's or its member's, spent or held so far this month.",
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                },
            },
        },
        "rule": {
            "type": "object",
            "required": ["name", "targets"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "pattern": RULE_NAME},
                "when": {"$ref": "#/$defs/when"},
                "strategy": {"enum": ["single", "weighted", "fallback"], "default": "fallback"},
                "on": MOVE_ON,
                "targets": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/node"}},
                "when_budget_cannot_cover": {
                    "description": "Called instead of refusing when the budget cannot cover a target.",
                    "$ref": "#/$defs/target",
                },
                "retries": {"$ref": "#/$defs/retries"},
            },
        },
    },
}
