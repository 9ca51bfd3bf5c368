"""`POST /v1/scores`: an application scores one of its team's usage records, named by the
`x-playground-request-id` the gateway answered it with (`usage.scores`).

The key is authenticated and counted against its requests per minute like any gateway request
(`ratelimits.rate_admit_many`); the body is checked whole before anything is written. A record
of another team answers exactly as an id no record has: 404, the same words.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from playground.gateway.admission import api_key_authenticate
from playground.gateway.errors import GatewayError
from playground.gateway.ratelimits import rate_admit_many
from playground.lib.db import connections_heal
from playground.usage.models import Score
from playground.usage.scores import RecordNotFound, score_input, score_put_by_key

FIELDS = ("request_id", "kind", "value", "comment", "name")
EXAMPLE = '{"request_id": "<x-playground-request-id>", "kind": "thumbs", "value": 1, "comment": "…"}'


@dataclass(frozen=True)
class ScoreAnswer:
    status: int  # 201 made, 200 replaced (the key had a score of this name on the record)
    body: dict[str, Any]
    headers: dict[str, str]


def score_from_gateway(secret: str | None, raw: bytes) -> ScoreAnswer:
    """The whole request, in the database thread: the key, its rate, the body, the score."""
    connections_heal()
    key = api_key_authenticate(secret, sends=False)
    rate = rate_admit_many([key])[0]
    if isinstance(rate, GatewayError):
        raise rate
    body = _body(raw)
    try:
        given = score_input(
            kind=body.get("kind"),
            value=body.get("value"),
            comment="" if body.get("comment") is None else body["comment"],
            name="" if body.get("name") is None else body["name"],
        )
        score, made = score_put_by_key(key=key, request_id=body["request_id"], given=given)
    except ValidationError as error:
        field, messages = next(iter(error.message_dict.items()))
        raise GatewayError(400, f"invalid_{field}", " ".join(messages), headers=rate.headers) from None
    except RecordNotFound:
        raise GatewayError(
            404,
            "record_not_found",
            f"No usage record of this key's team has the request id {body['request_id']!r}: "
            "send the x-playground-request-id the gateway answered with.",
            headers=rate.headers,
        ) from None
    return ScoreAnswer(
        201 if made else 200, score_json(score, request_id=str(uuid.UUID(body["request_id"]))), rate.headers
    )


def _body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise GatewayError(
            400, "invalid_json", f"The body is not JSON: send an object such as {EXAMPLE}."
        ) from None
    if not isinstance(body, dict):
        raise GatewayError(400, "invalid_json", f"The body must be a JSON object such as {EXAMPLE}.")
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise GatewayError(
            400,
            "unknown_field",
            f"Unknown field{'s' * (len(unknown) > 1)} {', '.join(unknown)}: use {', '.join(FIELDS)}.",
        )
    try:
        uuid.UUID(body["request_id"])
    except (KeyError, TypeError, ValueError, AttributeError):
        raise GatewayError(
            400,
            "invalid_request_id",
            "request_id must be the x-playground-request-id a gateway response carried "
            "(a UUID, as a string).",
        ) from None
    return body


def score_json(score: Score, *, request_id: str) -> dict[str, Any]:
    return {
        "object": "score",
        "id": score.pk,
        "request_id": request_id,
        "kind": score.kind,
        "value": score.value,
        "name": score.name,
        "comment": score.comment,
        "created_at": score.created_at.isoformat(),
        "updated_at": score.updated_at.isoformat(),
    }
