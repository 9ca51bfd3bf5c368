"""The code generator on its own: the SDKs' keyword lists, the gateway's URLs, images as
placeholders, and Python literals that Python reads back as the body."""

from __future__ import annotations

import ast
import inspect
import json
from typing import Any
from urllib.parse import urlparse

from cloudflare.resources.ai.ai import AIResource
from openai.resources.chat.completions import Completions

from playground.gateway.routes import endpoint_for
from playground.providers.code_samples import (
    CLOUDFLARE_KWARGS,
    OPENAI_KWARGS,
    CodeTarget,
    SentRequest,
    TargetKind,
    code_snippets,
)
from playground.providers.kinds import WireFormat

MODEL = "@cf/moonshotai/kimi-k2.6"
IMAGE = {"sha256": "ab" * 32, "content_type": "image/webp", "bytes": 48_213}
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
BODY: dict[str, Any] = {
    "messages": [
        {"role": "system", "content": "Be brief.\nVery brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What's this?"},
                {"type": "image_url", "image_url": {"url": IMAGE}},
            ],
        },
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "ünïcode ✓ \u2028"},
    ],
    "stream": False,
    "temperature": 0.5,
    "stop": ["\n\n"],
    "chat_template_kwargs": {"thinking": True},
}  # fmt: skip


def gateway(wire: WireFormat) -> CodeTarget:
    return CodeTarget(
        kind=TargetKind.GATEWAY,
        wire=wire,
        openai_base="https://play.example/v1",
        workers_base="https://play.example/client/v4" if wire == WireFormat.WORKERS_AI else "",
        account_id="acct",
        env_var="PLAYGROUND_API_KEY",
        env_help="a team API key",
    )


def snippets(target: CodeTarget) -> dict[str, str]:
    sent = SentRequest(model=MODEL, body=BODY, affinity_key="pg-1")
    return {snippet.key: snippet.code for snippet in code_snippets(target=target, sent=sent)}


def test_the_named_keywords_are_keywords_of_the_installed_sdks() -> None:
    assert set(inspect.signature(Completions.create).parameters) >= OPENAI_KWARGS | {
        "extra_body",
        "extra_headers",
    }
    cloudflare_run = inspect.signature(AIResource.run).parameters  # the last overload: every keyword
    assert set(cloudflare_run) >= CLOUDFLARE_KWARGS | {"extra_body", "extra_headers", "account_id"}


def test_every_gateway_url_is_one_the_gateway_serves() -> None:
    for wire in WireFormat:
        for snippet in code_snippets(
            target=gateway(wire), sent=SentRequest(model=MODEL, body=BODY, affinity_key="")
        ):
            if snippet.url:
                assert endpoint_for(urlparse(snippet.url).path) is not None, snippet.url


def test_the_openai_call_is_python_that_holds_the_body_exactly() -> None:
    code = snippets(gateway(WireFormat.OPENAI))["python-openai"]
    call = next(
        node
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "create"
    )
    arguments = {keyword.arg: ast.literal_eval(keyword.value) for keyword in call.keywords}
    extra = arguments.pop("extra_body")

    assert arguments.pop("extra_headers") == {"x-session-affinity": "pg-1"}
    assert {**arguments, **extra} == {
        "model": MODEL,
        **BODY,
        "messages": [*BODY["messages"][:1], placeholder_user(), *BODY["messages"][2:]],
    }


def test_curl_and_fetch_carry_the_body_as_json_with_the_image_as_a_named_placeholder() -> None:
    code = snippets(gateway(WireFormat.WORKERS_AI))
    curl = code["curl"]
    body = json.loads(curl[curl.index("<<'JSON'\n") + 9 : curl.rindex("\nJSON")])

    assert body["messages"][1] == placeholder_user() and "model" not in body
    image_note = "(image/webp, 48,213 bytes, sha256 abababababababab…)."
    assert f"# IMAGE_1_BASE64: the base64 of the image sent here {image_note}" in curl
    assert "// IMAGE_1_BASE64:" in code["js-fetch"]
    assert "https://play.example/client/v4/accounts/acct/ai/run/@cf/moonshotai/kimi-k2.6" in curl


def test_an_openai_wire_has_no_cloudflare_snippet_and_says_why() -> None:
    target = gateway(WireFormat.OPENAI)
    (cloudflare,) = [
        s
        for s in code_snippets(target=target, sent=SentRequest(MODEL, BODY, ""))
        if s.key == "python-cloudflare"
    ]

    assert cloudflare.code == "" and "speaks OpenAI's" in cloudflare.note


def placeholder_user() -> dict[str, object]:
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": "What's this?"},
            {"type": "image_url", "image_url": {"url": "data:image/webp;base64,IMAGE_1_BASE64"}},
        ],
    }
