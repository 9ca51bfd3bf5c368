"""Errors the gateway answers, in the shape of the API the client called.

On `/v1` an OpenAI error object (`{"error": {"message", "type", "param", "code"}}`), which
the `openai` SDK raises as its typed errors; on `/client/v4` Cloudflare's v4 envelope
(`{"result": null, "success": false, "errors": [{"code", "message"}]}`), which the
`cloudflare` SDK raises. A budget refusal answers 402: the official SDKs retry 408, 409, 429
and 5xx by themselves, and a refusal sent again is only refused again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum


class ErrorShape(StrEnum):
    OPENAI = "openai"
    V4 = "v4"


# OpenAI's error `type` for each status (what its SDKs and users expect to read).
OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "insufficient_quota",
    403: "permission_denied",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}
# Cloudflare's numeric codes where one is documented (docs/reference/workers-ai-api.md §8);
# otherwise the HTTP status stands as the code.
V4_CODES = {"invalid_api_key": 10000, "invalid_input": 8001, "request_too_large": 3006}


@dataclass
class GatewayError(Exception):
    """An answer that is an error: its status, a code a program can match, and what a person reads."""

    status: int
    code: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)

    def body(self, shape: ErrorShape) -> bytes:
        if shape == ErrorShape.OPENAI:
            error = {
                "message": self.message,
                "type": OPENAI_TYPES.get(self.status, "api_error"),
                "param": None,
                "code": self.code,
            }
            return json.dumps({"error": error}).encode()
        detail = {"code": V4_CODES.get(self.code, self.status), "message": self.message, "type": self.code}
        return json.dumps({"result": None, "success": False, "errors": [detail], "messages": []}).encode()
