"""Code that sends a chat request the way the playground sends it: curl, Python (`openai` and
`cloudflare` SDKs) and JavaScript `fetch`.

The input is the body as the adapter sends it, in the form it is kept (`ChatAdapter.body_as_sent`:
secrets and images already redacted), and a `CodeTarget`: the connection itself, or this app's
gateway, which speaks the same two APIs (OpenAI's chat completions under `/v1`, Workers AI's
`/client/v4/accounts/{id}/ai/run/{model}`). The code sends that body field for field, with the
headers `adapter.headers` sends (`wire_headers`: the affinity key too); the token is read from an
environment variable whose name the code says, and each image is a placeholder to fill in.

curl and `fetch` speak the API the playground speaks on the connection, so what they send
arrives as the playground's request did. The `openai` SDK always speaks chat completions: on a
Workers AI connection it goes to Workers AI's OpenAI-compatible endpoint, with the model in the
body. The `cloudflare` SDK speaks only Workers AI's API (it percent-encodes the `/` of a model id
in the path, which the server decodes).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import quote

from playground.providers.adapters.base import wire_headers
from playground.providers.adapters.openai_compat import OpenAICompatAdapter
from playground.providers.adapters.workers_ai import WorkersAIAdapter
from playground.providers.kinds import ConnectionKind, WireFormat
from playground.providers.model_ids import model_id_path
from playground.providers.models import ProviderConnection
from playground.providers.services import engine_account_id

# Where the gateway serves the two APIs (playground.gateway.routes): OpenAI's and Cloudflare's own bases.
GATEWAY_OPENAI_PREFIX = "/v1"
GATEWAY_WORKERS_PREFIX = "/client/v4"

# Keyword arguments of `client.chat.completions.create` (openai) and `client.ai.run` (cloudflare)
# that the playground may send; any other body field goes in `extra_body`. A test checks both
# lists against the installed SDKs' signatures.
OPENAI_KWARGS = frozenset(
    {
        "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens", "temperature",
        "top_p", "seed", "stop", "presence_penalty", "frequency_penalty", "tools", "tool_choice",
        "parallel_tool_calls", "response_format", "reasoning_effort", "logprobs", "top_logprobs", "n",
    }
)  # fmt: skip
CLOUDFLARE_KWARGS = frozenset(
    {
        "messages", "prompt", "stream", "max_tokens", "temperature", "top_p", "top_k", "seed",
        "presence_penalty", "frequency_penalty", "repetition_penalty", "tools", "functions",
        "response_format", "raw", "lora",
    }
)  # fmt: skip

IMAGE_KEYS = frozenset({"sha256", "content_type", "bytes"})  # a redacted image (providers.images)
INLINE_WIDTH = 72  # a container this short in Python or JSON stays on one line
LINE_WIDTH = 100


class TargetKind(StrEnum):
    DIRECT = "direct"
    GATEWAY = "gateway"


@dataclass(frozen=True)
class CodeTarget:
    """Where generated code sends a request, and which secret it sends."""

    kind: TargetKind
    wire: WireFormat  # the API the playground speaks to this connection: curl and fetch speak it too
    openai_base: str  # the openai SDK's base_url: POST {openai_base}/chat/completions
    workers_base: str  # the cloudflare SDK's base_url; "" when the target has no Workers AI API
    account_id: str
    env_var: str  # the environment variable holding the token; "" when none is sent
    env_help: str  # what that variable holds, said in the code's first comment


@dataclass(frozen=True)
class SentRequest:
    """A request as the playground sends it (or sent it)."""

    model: str
    body: Mapping[str, Any]  # as kept: `ChatAdapter.body_as_sent`, or a usage record's body
    affinity_key: str

    @property
    def fields(self) -> dict[str, Any]:
        """The body without `model` (the Workers AI API takes it in the path), images as placeholders."""
        return {key: value for key, value in _with_placeholders(self.body).items() if key != "model"}

    @property
    def stream(self) -> bool:
        return self.body.get("stream") is True


@dataclass(frozen=True)
class Snippet:
    key: str  # curl | python-openai | python-cloudflare | js-fetch
    label: str
    language: str  # sh | python | js
    url: str  # where it sends the request ("" when unavailable)
    code: str  # "" when the target cannot take this client (`note` says why)
    note: str = ""


# --- targets -----------------------------------------------------------------------------


def direct_target(
    connection: ProviderConnection, adapter: WorkersAIAdapter | OpenAICompatAdapter
) -> CodeTarget:
    """The connection itself, as its adapter (`adapter_for(connection)`) reaches it."""
    openai_base = adapter.openai_endpoint().removesuffix("/chat/completions")
    if isinstance(adapter, OpenAICompatAdapter):
        return CodeTarget(
            kind=TargetKind.DIRECT,
            wire=WireFormat.OPENAI,
            openai_base=openai_base,
            workers_base="",
            account_id="",
            env_var="OPENAI_API_KEY" if adapter.token else "",
            env_help="the endpoint's API key",
        )
    engine = connection.kind == ConnectionKind.ENGINE
    return CodeTarget(
        kind=TargetKind.DIRECT,
        wire=WireFormat.WORKERS_AI,
        openai_base=openai_base,
        workers_base=adapter.base_url,
        account_id=adapter.account_id,
        env_var=("ENGINE_API_TOKEN" if engine else "CLOUDFLARE_API_TOKEN") if adapter.token else "",
        env_help=(
            "the engine's token (ENGINE_API_TOKEN where the playground runs)"
            if engine
            else "a Cloudflare API token with Workers AI access"
        ),
    )


def gateway_target(connection: ProviderConnection, *, origin: str) -> CodeTarget:
    """This app's gateway at `origin` (scheme and host), with a team API key of `connection`."""
    workers = connection.spec.wire == WireFormat.WORKERS_AI
    account_id = ""
    if workers:
        engine = connection.kind == ConnectionKind.ENGINE
        account_id = engine_account_id(team_id=connection.team_id) if engine else connection.account_id
    origin = origin.rstrip("/")
    return CodeTarget(
        kind=TargetKind.GATEWAY,
        wire=connection.spec.wire,
        openai_base=origin + GATEWAY_OPENAI_PREFIX,
        workers_base=origin + GATEWAY_WORKERS_PREFIX if workers else "",
        account_id=account_id or "unused",  # the gateway ignores it: the key decides the connection
        env_var="PLAYGROUND_API_KEY",
        env_help=f"a team API key for the connection {connection.name!r} (Team → API keys)",
    )


# --- snippets ----------------------------------------------------------------------------


def code_snippets(*, target: CodeTarget, sent: SentRequest) -> list[Snippet]:
    """The four snippets, in a fixed order; one the target cannot take has no code and says why."""
    return [
        _curl(target, sent),
        _python_openai(target, sent),
        _python_cloudflare(target, sent),
        _fetch(target, sent),
    ]


def _http_call(target: CodeTarget, sent: SentRequest) -> tuple[str, dict[str, Any]]:
    """The URL and body curl and fetch send: the playground's own API on this target."""
    if target.wire == WireFormat.WORKERS_AI and target.workers_base:
        return _run_url(target, sent.model), sent.fields
    return target.openai_base + "/chat/completions", {"model": sent.model, **sent.fields}


def _run_url(target: CodeTarget, model: str) -> str:
    return f"{target.workers_base}/accounts/{quote(target.account_id, safe='')}/ai/run/{model_id_path(model)}"


def _headers(sent: SentRequest) -> dict[str, str]:
    """The headers the adapter sends (the token aside), with the JSON body's content type."""
    return {**wire_headers(affinity_key=sent.affinity_key, token=""), "content-type": "application/json"}


def _curl(target: CodeTarget, sent: SentRequest) -> Snippet:
    url, body = _http_call(target, sent)
    lines = [f"curl -sS{' -N' if sent.stream else ''} {shlex.quote(url)}"]
    if target.env_var:
        lines.append(f'-H "Authorization: Bearer ${target.env_var}"')
    lines += [f"-H {shlex.quote(f'{_title(name)}: {value}')}" for name, value in _headers(sent).items()]
    lines.append("--data-binary @- <<'JSON'")
    code = " \\\n  ".join(lines) + "\n" + _json(body) + "\nJSON\n"
    return Snippet("curl", "curl", "sh", url, _preamble("#", target, sent) + code)


def _python_openai(target: CodeTarget, sent: SentRequest) -> Snippet:
    url = target.openai_base + "/chat/completions"
    note = ""
    if target.wire == WireFormat.WORKERS_AI:
        note = (
            "Through Workers AI's OpenAI-compatible endpoint: the same body, with the model in it "
            "instead of in the URL."
        )
    key = f'os.environ["{target.env_var}"]' if target.env_var else '"unused"'
    kwargs = _kwargs({"model": sent.model, **sent.fields}, OPENAI_KWARGS | {"model"}, sent.affinity_key)
    if sent.stream:
        call = "stream = client.chat.completions.create("
        tail = (
            "for chunk in stream:\n"
            "    for choice in chunk.choices:\n"
            '        print(choice.delta.content or "", end="", flush=True)\n'
            "print()\n"
        )
    else:
        call = "completion = client.chat.completions.create("
        tail = "print(completion.choices[0].message.content)\n"
    code = (
        _preamble("#", target, sent)
        + "import os\n\nfrom openai import OpenAI\n\n"
        + _constructor("OpenAI", base_url=_py(target.openai_base), api_key=key)
        + call
        + "\n"
        + kwargs
        + ")\n"
        + tail
    )
    return Snippet("python-openai", "Python · openai", "python", url, code, note)


def _python_cloudflare(target: CodeTarget, sent: SentRequest) -> Snippet:
    label = "Python · cloudflare"
    if not target.workers_base:
        note = (
            "The cloudflare SDK speaks Workers AI's API; this connection speaks OpenAI's: use the openai SDK."
        )

        return Snippet("python-cloudflare", label, "python", "", "", note)
    token = f'os.environ["{target.env_var}"]' if target.env_var else '"unused"'
    head = f"    {_py(sent.model)},\n    account_id={_py(target.account_id)},\n"
    kwargs = head + _kwargs(sent.fields, CLOUDFLARE_KWARGS, sent.affinity_key)
    if sent.stream:
        body = (
            "with client.ai.with_streaming_response.run(\n"
            + kwargs
            + ") as response:\n"
            + "    for line in response.iter_lines():\n"
            + '        if line.startswith("data: "):\n'
            + "            print(line[6:])\n"
        )
    else:
        body = "result = client.ai.run(\n" + kwargs + ")\nprint(result)\n"
    code = (
        _preamble("#", target, sent)
        + "import os\n\nfrom cloudflare import Cloudflare\n\n"
        + _constructor("Cloudflare", base_url=_py(target.workers_base), api_token=token)
        + body
    )
    return Snippet("python-cloudflare", label, "python", _run_url(target, sent.model), code)


def _fetch(target: CodeTarget, sent: SentRequest) -> Snippet:
    url, body = _http_call(target, sent)
    headers = []
    if target.env_var:
        headers.append(f'    "Authorization": `Bearer ${{process.env.{target.env_var}}}`,')
    headers += [
        f"    {json.dumps(_title(name))}: {json.dumps(value)}," for name, value in _headers(sent).items()
    ]
    if sent.stream:
        tail = (
            "const decoder = new TextDecoder();\n"
            "for await (const chunk of response.body) {\n"
            "  process.stdout.write(decoder.decode(chunk, { stream: true }));\n"
            "}\n"
        )
    else:
        tail = "console.log(JSON.stringify(await response.json(), null, 2));\n"
    code = (
        _preamble("//", target, sent)
        + f"const body = {_json(body)};\n"
        + f"const response = await fetch({json.dumps(url)}, {{\n"
        + '  method: "POST",\n'
        + "  headers: {\n"
        + "\n".join(headers)
        + "\n  },\n"
        + "  body: JSON.stringify(body),\n"
        + "});\n"
        + "if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);\n"
        + tail
    )
    return Snippet("js-fetch", "JavaScript · fetch", "js", url, code)


def _preamble(comment: str, target: CodeTarget, sent: SentRequest) -> str:
    """The first comments: which variable holds the secret, and what each image placeholder stands for."""
    lines = []
    if target.env_var:
        lines.append(f"{comment} {target.env_var}: {target.env_help}.")
    for placeholder, image in _images(sent.body):
        size = f"{image['bytes']:,} bytes, " if isinstance(image.get("bytes"), int) else ""
        lines.append(
            f"{comment} {placeholder}: the base64 of the image sent here "
            f"({image.get('content_type') or 'image'}, {size}sha256 {str(image.get('sha256', ''))[:16]}…)."
        )
    return "".join(line + "\n" for line in lines) + ("\n" if lines else "")


def _kwargs(fields: Mapping[str, Any], known: frozenset[str], affinity_key: str) -> str:
    """Keyword arguments of an SDK call, one a line: the fields it names, then the others in `extra_body`."""
    named = {key: value for key, value in fields.items() if key in known}
    extra = {key: value for key, value in fields.items() if key not in known}
    lines = [f"    {key}={_py(value, 1)},\n" for key, value in named.items()]
    if affinity_key:
        lines.append(f"    extra_headers={_py({'x-session-affinity': affinity_key}, 1)},\n")
    if extra:
        lines.append(f"    extra_body={_py(extra, 1)},\n")
    return "".join(lines)


def _constructor(name: str, **arguments: str) -> str:
    """`client = Name(a=..., b=...)`, its arguments one a line when they do not fit one."""
    line = f"client = {name}({', '.join(f'{key}={value}' for key, value in arguments.items())})\n"
    if len(line) <= LINE_WIDTH:
        return line
    return (
        f"client = {name}(\n" + "".join(f"    {key}={value},\n" for key, value in arguments.items()) + ")\n"
    )


def _title(header: str) -> str:
    """`content-type` as `Content-Type`, the way curl users write it (`x-` headers keep lower case)."""
    return header if header.startswith("x-") else "-".join(part.capitalize() for part in header.split("-"))


# --- Python literals and image placeholders ------------------------------------------------


def _py(value: Any, depth: int = 0) -> str:
    """`value` (JSON data) as a Python literal, indented as ruff formats it."""
    return _literal(value, depth, python=True)


def _json(value: Any) -> str:
    """`value` as JSON text that a person reads: short containers on one line, two-space indents."""
    return _literal(value, 0, python=False)


def _literal(value: Any, depth: int, *, python: bool) -> str:
    inline = _inline(value, python=python)
    unit = "    " if python else "  "
    if len(inline) + len(unit) * depth <= INLINE_WIDTH or not isinstance(value, dict | list) or not value:
        return inline
    pad, end, comma = unit * (depth + 1), unit * depth, "," if python else ""
    if isinstance(value, dict):
        items = [
            f"{pad}{json.dumps(str(key), ensure_ascii=False)}: {_literal(item, depth + 1, python=python)}"
            for key, item in value.items()
        ]
        return "{\n" + ",\n".join(items) + comma + "\n" + end + "}"
    items = [f"{pad}{_literal(item, depth + 1, python=python)}" for item in value]
    return "[\n" + ",\n".join(items) + comma + "\n" + end + "]"


def _inline(value: Any, *, python: bool) -> str:
    if python and (value is None or isinstance(value, bool)):
        return repr(value)
    if isinstance(value, dict):
        pairs = (
            f"{json.dumps(str(key), ensure_ascii=False)}: {_inline(item, python=python)}"
            for key, item in value.items()
        )
        return "{" + ", ".join(pairs) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_inline(item, python=python) for item in value) + "]"
    return json.dumps(value, ensure_ascii=False)  # a JSON string or number is a Python literal too


def _is_image(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == IMAGE_KEYS


def _images(body: Any) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Each redacted image of `body` once, in order, with its placeholder name (IMAGE_1_BASE64, ...)."""
    seen: dict[str, int] = {}
    for image in _walk_images(body):
        digest = str(image.get("sha256"))
        if digest not in seen:
            seen[digest] = len(seen) + 1
            yield f"IMAGE_{seen[digest]}_BASE64", image


def _walk_images(value: Any) -> Iterator[Mapping[str, Any]]:
    if _is_image(value):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _walk_images(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk_images(item)


def _with_placeholders(body: Mapping[str, Any]) -> dict[str, Any]:
    """`body` with each redacted image back as a data URL whose base64 is a placeholder name."""
    names = {str(image.get("sha256")): name for name, image in _images(body)}

    def put(value: Any) -> Any:
        if _is_image(value):
            return f"data:{value.get('content_type') or 'image/png'};base64,{names[str(value.get('sha256'))]}"
        if isinstance(value, Mapping):
            return {key: put(item) for key, item in value.items()}
        if isinstance(value, list):
            return [put(item) for item in value]
        return value

    result: dict[str, Any] = put(body)
    return result
