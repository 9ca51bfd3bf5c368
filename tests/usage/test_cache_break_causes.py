"""Causes the detector tells apart from the records alone: a route change (a routing policy
moved the session) from a model the client changed, and digests stored before the format and
mid-conversation system sections compare with new ones without a false break."""

from __future__ import annotations

from playground.usage.insights.cache_breaks import Cause, SessionRequest, session_breaks
from playground.usage.prefix_digest import PrefixDigest, prefix_digest

KIMI, GPT = "@cf/moonshotai/kimi-k2.5", "@cf/openai/gpt-oss-120b"
BODY = {
    "model": KIMI,
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
}


def request(
    record_id: int, *, model: str = KIMI, connection: int = 1, routed: bool = False, cached: int = 0
) -> SessionRequest:
    return SessionRequest(
        record_id=record_id,
        model_id=model,
        digest=prefix_digest(BODY),
        affinity_key="aff",
        prompt_tokens=1000 + record_id,
        cached_tokens=cached,
        succeeded=True,
        connection_id=connection,
        routed=routed,
    )


def test_a_routed_move_is_a_route_change_and_a_clients_own_is_a_model_change() -> None:
    (routed,) = session_breaks("s", [request(1), request(2, model=GPT, connection=2, routed=True)])
    assert routed.cause == Cause.ROUTE_CHANGED and "routing policy" in routed.detail
    (routed_same_model,) = session_breaks("s", [request(1), request(2, connection=2, routed=True)])
    assert routed_same_model.cause == Cause.ROUTE_CHANGED
    (own,) = session_breaks("s", [request(1), request(2, model=GPT)])
    assert own.cause == Cause.MODEL_CHANGED


def test_a_digest_stored_before_the_new_sections_compares_equal() -> None:
    new = prefix_digest(BODY)
    assert new is not None
    old_stored = {key: value for key, value in new.stored().items() if key not in ("format", "later_system")}
    assert PrefixDigest.from_stored(old_stored) == new
    with_format = prefix_digest({**BODY, "response_format": {"type": "json_object"}})
    assert with_format is not None and with_format.stored()["format"]
    assert PrefixDigest.from_stored(with_format.stored()) == with_format
