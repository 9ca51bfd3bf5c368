"""The gateway's URLs: which API each speaks, and the shape its errors take."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from playground.gateway.errors import ErrorShape
from playground.providers.adapters import PassthroughRoute

PREFIXES = ("/v1/", "/client/v4/")


class Action(StrEnum):
    CHAT = "chat"
    MODELS = "models"
    SCORES = "scores"  # POST /v1/scores: a score on one of the team's records


@dataclass(frozen=True)
class Endpoint:
    action: Action
    shape: ErrorShape
    method: str
    route: PassthroughRoute = PassthroughRoute.CHAT_COMPLETIONS
    path_model: str = ""  # /ai/run/{model}


# The account id in a /client/v4 path is not trusted (nor used): the key decides the connection.
_ACCOUNT = r"/client/v4/accounts/[^/]+/ai"
_PATTERNS: tuple[tuple[re.Pattern[str], Endpoint], ...] = (
    (re.compile(r"^/v1/chat/completions/?$"), Endpoint(Action.CHAT, ErrorShape.OPENAI, "POST")),
    (re.compile(r"^/v1/models/?$"), Endpoint(Action.MODELS, ErrorShape.OPENAI, "GET")),
    (re.compile(r"^/v1/scores/?$"), Endpoint(Action.SCORES, ErrorShape.OPENAI, "POST")),
    (re.compile(_ACCOUNT + r"/v1/chat/completions/?$"), Endpoint(Action.CHAT, ErrorShape.V4, "POST")),
    (re.compile(_ACCOUNT + r"/v1/models/?$"), Endpoint(Action.MODELS, ErrorShape.V4, "GET")),
)
_RUN = re.compile(_ACCOUNT + r"/run/(?P<model>.+)$")


def is_gateway_path(path: str) -> bool:
    return path.startswith(PREFIXES)


def endpoint_for(path: str) -> Endpoint | None:
    for pattern, endpoint in _PATTERNS:
        if pattern.match(path):
            return endpoint
    if match := _RUN.match(path):
        model = match.group("model")  # ASGI paths arrive percent-decoded
        return Endpoint(Action.CHAT, ErrorShape.V4, "POST", route=PassthroughRoute.RUN, path_model=model)
    return None


def shape_for(path: str) -> ErrorShape:
    return ErrorShape.V4 if path.startswith("/client/v4/") else ErrorShape.OPENAI
