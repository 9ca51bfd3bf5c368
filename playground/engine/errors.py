"""Errors the engine answers with: a Workers AI internal code, an HTTP status and a message.

The codes follow Cloudflare's published table (5007 no such model, 3006 request too
large, 3040 out of capacity, ...) and the codes seen in practice (8001 invalid input).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

INVALID_INPUT = 8001
NO_SUCH_MODEL = 5007
REQUEST_TOO_LARGE = 3006
OUT_OF_CAPACITY = 3040
INCOMPLETE_REQUEST = 3003
AUTHENTICATION = 10000
NO_ROUTE = 7000
INTERNAL = 5001

CAPACITY_MESSAGE = "Capacity temporarily exceeded, please try again."


@dataclass(frozen=True)
class EngineError(Exception):
    code: int
    status: int
    message: str

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def invalid_input(message: str) -> EngineError:
    return EngineError(INVALID_INPUT, 400, message)


def served_text(model_ids: Sequence[str]) -> str:
    """'a', or 'a' and 'b', or 'a', 'b' and 'c'."""
    quoted = [repr(model_id) for model_id in model_ids]
    return " and ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)


def no_such_model(requested: object, served: Sequence[str]) -> EngineError:
    return EngineError(
        NO_SUCH_MODEL, 400, f"No such model {requested!r}; this engine serves {served_text(served)}."
    )


def out_of_capacity() -> EngineError:
    return EngineError(OUT_OF_CAPACITY, 429, CAPACITY_MESSAGE)


def replica_crashed() -> EngineError:
    return EngineError(
        INTERNAL, 500, "The model replica stopped while answering and is being restarted; please retry."
    )
