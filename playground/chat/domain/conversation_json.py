"""A conversation as one JSON document: written for export, read for import.

The document is the OpenAI chat-completions request the conversation's next turn would send,
so without its `playground` key it is a body one could POST to an OpenAI-compatible endpoint:
`model`, `messages` (the system prompt first; images as `image_url` parts with data URLs;
answers with `tool_calls`; `tool` messages with `tool_call_id`), `tools` as sent (no mocks),
`tool_choice`, `parallel_tool_calls`, `response_format` and the parameters by their request
field (the thinking switch in `chat_template_kwargs`). What is the playground's own sits under
`playground`: the format and its version, the title, the connection's name and kind, session
affinity, the tools' mocks, auto-mock steps, the prompt variables and when it was exported.
No secret is in it: a connection is named, never its token, and the affinity key stays behind.

Reading takes that document, a bare request body (`{"messages": [...]}`, its `playground`
key optional) or a bare list of messages, and refuses it with every problem at its JSON path
(`ConversationJsonInvalid`). The settings are checked by the rules a preset file is checked
by (`presets.setup.setup_document_problems`), their paths named where they sit here. What
depends on where the conversation goes (the model's parameters, images, tools; texts' length)
is the import service's to check (`chat.services.conversation_json`).

Pure functions over the document; nothing here writes.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as dt
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError

from playground.chat.domain.tools import LOCAL_KEYS, tools_upstream
from playground.chat.models import Conversation, MessageRole
from playground.lib.storable import is_storable
from playground.presets.setup import setup_document_problems
from playground.providers.answer_collector import ToolCall
from playground.providers.json_problems import Issue, json_path
from playground.providers.request_rules import PARAMETERS_BY_WIRE, THINKING_FIELDS

FORMAT = "playground-conversation"
FORMAT_VERSION = 1
KEY = "playground"  # the document's one key of ours
DOCUMENT_MAX_BYTES = 32 * 1024 * 1024  # room for a few images at the upload limit, base64 included
MAX_MESSAGES = 1_000
MAX_PROBLEMS = 50  # a document wrong everywhere is named at its first problems, not all of them
TITLE_MAX_CHARS = Conversation._meta.get_field("title").max_length or 200
VARIABLE_TYPES = ("text", "number", "json")
THINKING_KEYS = frozenset(THINKING_FIELDS.values())  # how `chat_template_kwargs` names the switch
# Request fields read as the composer's parameters, besides their own names.
PARAMETER_ALIASES = {"max_completion_tokens": "max_tokens"}
# The playground decides streaming per model: a body's own choice is read and let go.
IGNORED_KEYS = ("stream", "stream_options")
REQUEST_KEYS = frozenset(
    {"model", "messages", "tools", "tool_choice", "parallel_tool_calls", "response_format", KEY}
    | set(PARAMETERS_BY_WIRE)
    | set(PARAMETER_ALIASES)
    | set(IGNORED_KEYS)
)
OUR_KEYS = (
    "format",
    "version",
    "title",
    "connection",
    "use_affinity",
    "tool_mocks",
    "auto_mock_steps",
    "variables",
    "exported_at",
)
SYSTEM_ROLES = ("system", "developer")  # OpenAI's newer name for the same message
MESSAGE_KEYS = {
    "system": ("role", "content"),
    "developer": ("role", "content"),
    "user": ("role", "content"),
    "assistant": ("role", "content", "tool_calls", "reasoning", "reasoning_content"),
    "tool": ("role", "content", "tool_call_id"),
}
CALL_KEYS = ("id", "type", "function", "index")
DATA_URL = re.compile(r"data:(?:image/[\w.+-]+)?(?:;[\w.+-]+=[\w.+-]+)*;base64,", re.ASCII)


class ConversationJsonInvalid(ValidationError):
    """A document that cannot be imported; `problems` names each at its JSON path."""

    def __init__(self, problems: Sequence[Issue]) -> None:
        self.problems = list(problems)[:MAX_PROBLEMS]
        super().__init__([f"{problem.path}: {problem.message}" for problem in self.problems])


# --- writing ---------------------------------------------------------------------------------


def document_build(
    *,
    conversation: Conversation,
    messages: list[dict[str, Any]],
    parameters: Mapping[str, Any],
    exported_at: dt.datetime,
) -> dict[str, Any]:
    """The document for `conversation`: `messages` as its history sends them, `parameters` as
    request fields (`composer.parameters_wire`)."""
    document: dict[str, Any] = {"model": conversation.model_id, "messages": messages}
    tools = conversation.tools or []
    if tools:  # OpenAI refuses a tool choice without tools
        document["tools"] = tools_upstream(tools)
        document["tool_choice"] = conversation.tool_choice or "auto"
        document["parallel_tool_calls"] = conversation.parallel_tool_calls
    if conversation.response_format:
        document["response_format"] = conversation.response_format
    document.update(parameters)
    ours: dict[str, Any] = {"format": FORMAT, "version": FORMAT_VERSION, "title": conversation.title}
    if conversation.connection is not None:
        ours["connection"] = {"name": conversation.connection.name, "kind": conversation.connection.kind}
    ours["use_affinity"] = conversation.use_affinity
    mocks = {
        tool["function"]["name"]: {key: tool[key] for key in LOCAL_KEYS if key in tool}
        for tool in tools
        if any(key in tool for key in LOCAL_KEYS)
    }
    if mocks:
        ours["tool_mocks"] = mocks
    ours["auto_mock_steps"] = conversation.auto_mock_steps
    ours["variables"] = list(conversation.variables or [])
    ours["exported_at"] = exported_at.isoformat()
    document[KEY] = ours
    return document


def document_text(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


# --- reading ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportedImage:
    path: str  # where its data URL is, for an error about the image itself
    data: bytes  # decoded, not checked yet: the upload pipeline judges it


@dataclass(frozen=True)
class ImportedMessage:
    path: str
    role: str  # user, assistant or tool
    text: str
    images: tuple[ImportedImage, ...] = ()
    reasoning: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    answers: int | None = None  # a tool result: the position of the answer whose call it answers
    call_index: int | None = None  # ... and which of its calls
    tool_call_id: str = ""
    # Marked written (`Message.written`): an answer (not generated here), or a question no
    # answer follows in the document, which the history then sends as the document had it.
    written: bool = False


@dataclass(frozen=True)
class ImportedConversation:
    model_id: str  # "" when the document names none
    system_prompt: str
    system_path: str
    messages: tuple[ImportedMessage, ...]
    title: str = ""
    connection: Mapping[str, str] | None = None  # the name and kind the document gives
    tools: list[dict[str, Any]] = field(default_factory=list)  # with their mocks, as stored
    tool_choice: str | dict[str, Any] = "auto"
    parallel_tool_calls: bool = True
    auto_mock_steps: int = 0
    response_format: dict[str, Any] | None = None
    parameters: dict[str, Any] = field(default_factory=dict)  # by the composer's names
    parameter_paths: dict[str, str] = field(default_factory=dict)  # where each one was
    use_affinity: bool = True
    variables: list[Any] = field(default_factory=list)


def document_read(text: str) -> ImportedConversation:
    """The conversation `text` holds, checked; raises `ConversationJsonInvalid`."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > DOCUMENT_MAX_BYTES:
        raise ConversationJsonInvalid(
            [
                Issue(
                    "$",
                    f"The document is {_megabytes(size)}; at most {_megabytes(DOCUMENT_MAX_BYTES)} are read.",
                )
            ]
        )
    if not text.strip():
        raise ConversationJsonInvalid([Issue("$", "Paste a conversation's JSON or choose its file.")])
    data = _json_load(text)
    problems = _unstorable(data, "$")
    if problems:
        raise ConversationJsonInvalid(problems)
    if isinstance(data, list):
        body: Mapping[str, Any] = {"messages": data}
        at = "$"
    elif isinstance(data, dict):
        body, at = data, "$.messages"
    else:
        raise ConversationJsonInvalid(
            [Issue("$", 'A conversation is a JSON object {"messages": [...], ...} or a list of messages.')]
        )
    problems = [
        Issue(json_path([key]), f"Not kept by the playground: {_kept_keys()}.")
        for key in body
        if key not in REQUEST_KEYS
    ]
    reading = _Reading(problems)
    if "messages" not in body:
        problems.append(Issue("$.messages", "Required: the conversation's messages."))
    system, system_path, messages = _messages_read(body.get("messages", []), at, reading)
    ours = reading.ours(body.get(KEY))
    parameters, parameter_paths = reading.parameters(body)
    tools = reading.tools(body.get("tools", []), ours.get("tool_mocks", {}))
    model = body.get("model")
    setup: dict[str, Any] = {
        "connection": ours.get("connection"),
        "model": model,
        "system_prompt": system,
        "tools": tools,
        "tool_choice": body.get("tool_choice", "auto"),
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "auto_mock_steps": ours.get("auto_mock_steps", 0),
        "response_format": _response_format(body.get("response_format")),
        "parameters": parameters,
        "affinity": ours.get("use_affinity", True),
    }
    # The connection and the model may be left out: they are chosen on import.
    left_out = {name for name in ("connection", "model") if setup[name] is None}
    paths = _SetupPaths(system_path=system_path, tools=tools, parameters=parameter_paths)
    problems += [
        Issue(paths.of(issue.path), issue.message)
        for issue in setup_document_problems(setup)
        if paths.field(issue.path) not in left_out
    ]
    if problems:
        raise ConversationJsonInvalid(problems)
    return ImportedConversation(
        model_id=model.strip() if isinstance(model, str) else "",
        system_prompt=system,
        system_path=system_path,
        messages=tuple(messages),
        title=str(ours.get("title", "")),
        connection=ours.get("connection"),
        tools=tools,
        tool_choice=setup["tool_choice"],
        parallel_tool_calls=setup["parallel_tool_calls"],
        auto_mock_steps=setup["auto_mock_steps"],
        response_format=setup["response_format"],
        parameters={name: value for name, value in parameters.items() if value is not None},
        parameter_paths=parameter_paths,
        use_affinity=setup["affinity"],
        variables=list(ours.get("variables", [])),
    )


def _json_load(text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        problem = f"Not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."
    except ValueError as exc:  # NaN or Infinity: JSON has no such number
        problem = f"Not valid JSON: {exc}."
    except RecursionError:
        problem = "Not readable as JSON: it is nested too deeply."
    raise ConversationJsonInvalid([Issue("$", problem)])


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _unstorable(value: Any, path: str) -> list[Issue]:
    """Where a text holds what no database stores (a NUL, a lone surrogate from an escape)."""
    if isinstance(value, str):
        if is_storable(value):
            return []
        return [Issue(path, "Holds a character that cannot be stored (a NUL or a lone surrogate).")]
    problems: list[Issue] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if not is_storable(key):
                problems += _unstorable(key, path)
                continue
            problems += _unstorable(item, _child(path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            problems += _unstorable(item, f"{path}[{index}]")
    return problems[:MAX_PROBLEMS]


def _child(path: str, key: str) -> str:
    """The path of `key` inside the object at `path`."""
    return path + json_path([key]).removeprefix("$")


def _kept_keys() -> str:
    return (
        "model, messages, tools, tool_choice, parallel_tool_calls, response_format, the parameters "
        f"({', '.join(PARAMETERS_BY_WIRE)}) and {KEY}; remove it to import"
    )


def _response_format(value: Any) -> Any:
    """A text format is no format (as the composer stores it)."""
    return None if isinstance(value, dict) and value == {"type": "text"} else value


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


# --- messages --------------------------------------------------------------------------------


def _messages_read(raw: Any, at: str, reading: _Reading) -> tuple[str, str, list[ImportedMessage]]:
    """(the system prompt, where it is, the other messages) of `raw`, every problem noted."""
    system, system_path = "", f"{at}[0].content"
    if not isinstance(raw, list):
        reading.problem(at, "Must be an array of messages.")
        return system, system_path, []
    if len(raw) > MAX_MESSAGES:
        reading.problem(at, f"{len(raw):,} messages; at most {MAX_MESSAGES:,} are imported.")
        return system, system_path, []
    messages: list[ImportedMessage] = []
    waiting: list[ToolCall] = []  # the last answer's calls no result has answered yet
    answer_path = ""
    for position, item in enumerate(raw):
        path = f"{at}[{position}]"
        role = item.get("role") if isinstance(item, dict) else None
        if role != MessageRole.TOOL and waiting:
            reading.calls_unanswered(answer_path, waiting)
            waiting = []
        if not isinstance(item, dict):
            reading.problem(path, 'A message is an object: {"role": ..., "content": ...}.')
            continue
        if role not in MESSAGE_KEYS:
            reading.problem(
                f"{path}.role", f"Unknown role {_short(role)}: a message is system, user, assistant or tool."
            )
            continue
        reading.unknown_keys(item, path, MESSAGE_KEYS[role], what=f"a {role} message")
        content = f"{path}.content"
        if role in SYSTEM_ROLES:
            if position != 0:
                reading.problem(
                    f"{path}.role",
                    "Only the first message may be a system message: it is the conversation's system prompt.",
                )
            system, _ = reading.content(item.get("content"), content, images=False)
        elif role == MessageRole.USER:
            found = len(reading.problems)
            text, images = reading.content(item.get("content"), content, images=True)
            if not text and not images and len(reading.problems) == found:
                reading.problem(content, "Empty: a user message has text or an image.")
            messages.append(ImportedMessage(path=path, role=role, text=text, images=tuple(images)))
        elif role == MessageRole.ASSISTANT:
            text, _ = reading.content(item.get("content"), content, images=False, optional=True)
            calls = reading.calls(item.get("tool_calls"), f"{path}.tool_calls")
            if not text and not calls:
                reading.problem(
                    path, "An answer has content or tool_calls (an empty one is a failed answer)."
                )
            reasoning = item.get("reasoning", item.get("reasoning_content")) or ""
            if not isinstance(reasoning, str):
                reading.problem(f"{path}.reasoning", "Must be text.")
                reasoning = ""
            messages.append(
                ImportedMessage(
                    path=path,
                    role=role,
                    text=text,
                    reasoning=reasoning,
                    tool_calls=tuple(calls),
                    written=True,
                )
            )
            waiting, answer_path = list(calls), path
        else:
            result = reading.tool_result(item, path, messages, waiting)
            if result is not None:
                messages.append(result)
    # Only the last answer may wait for its results: they are then given here, as any answer's.
    if waiting and messages[-1].role == MessageRole.TOOL:
        reading.calls_unanswered(answer_path, waiting)
    return system, system_path, _questions_marked(messages)


def _questions_marked(messages: list[ImportedMessage]) -> list[ImportedMessage]:
    """Each question no answer follows marked written, so the history sends it as the document
    had it (`chat.services.history`: an unanswered question is otherwise left out)."""
    marked = []
    for position, message in enumerate(messages):
        after = messages[position + 1] if position + 1 < len(messages) else None
        if message.role == MessageRole.USER and (after is None or after.role != MessageRole.ASSISTANT):
            message = dataclasses.replace(message, written=True)
        marked.append(message)
    return marked


class _Reading:
    """The checks of one document's parts; each problem found goes on `problems`."""

    def __init__(self, problems: list[Issue]) -> None:
        self.problems = problems

    def problem(self, path: str, message: str) -> None:
        self.problems.append(Issue(path, message))

    def unknown_keys(self, item: Mapping[str, Any], path: str, keys: Sequence[str], *, what: str) -> None:
        for key in item:
            if key not in keys:
                self.problem(_child(path, key), f"Unknown key: {what} has {', '.join(keys)}.")

    def content(
        self, raw: Any, path: str, *, images: bool, optional: bool = False
    ) -> tuple[str, list[ImportedImage]]:
        """The text of a message's `content` (text parts joined by newlines) and its images."""
        if raw is None:
            if not optional:
                self.problem(path, "Required: the message's text.")
            return "", []
        if isinstance(raw, str):
            return raw, []
        if not isinstance(raw, list):
            self.problem(path, "Text, or an array of content parts.")
            return "", []
        texts: list[str] = []
        found: list[ImportedImage] = []
        for index, part in enumerate(raw):
            where = f"{path}[{index}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif kind == "image_url" and images:
                image = self.image(part.get("image_url"), f"{where}.image_url")
                if image is not None:
                    found.append(image)
            elif kind == "image_url":
                self.problem(where, "Only user messages carry images.")
            else:
                image_part = ' or {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}'
                self.problem(
                    where,
                    'A content part is {"type": "text", "text": "..."}'
                    + (image_part if images else "")
                    + ".",
                )
        return "\n".join(texts), found

    def image(self, raw: Any, path: str) -> ImportedImage | None:
        url = raw.get("url") if isinstance(raw, dict) else raw
        where = f"{path}.url" if isinstance(raw, dict) else path
        if not isinstance(url, str):
            self.problem(path, 'Required: {"url": "data:image/png;base64,..."}.')
            return None
        match = DATA_URL.match(url)
        if match is None:
            linked = url.startswith(("http://", "https://"))
            self.problem(
                where,
                "A link to an image: only images carried in the document (data: URLs) are imported; "
                "the playground does not fetch links."
                if linked
                else "Not an image data URL (data:image/...;base64,...).",
            )
            return None
        try:
            data = base64.b64decode(url[match.end() :], validate=True)
        except (binascii.Error, ValueError):
            self.problem(where, "Its base64 data does not decode.")
            return None
        return ImportedImage(path=where, data=data)

    def calls(self, raw: Any, path: str) -> list[ToolCall]:
        if raw is None:
            return []
        if not isinstance(raw, list):
            self.problem(
                path, 'An array of calls: {"id", "type": "function", "function": {"name", "arguments"}}.'
            )
            return []
        calls: list[ToolCall] = []
        for index, call in enumerate(raw):
            where = f"{path}[{index}]"
            if not isinstance(call, dict):
                self.problem(
                    where, 'A call is {"id", "type": "function", "function": {"name", "arguments"}}.'
                )
                continue
            self.unknown_keys(call, where, CALL_KEYS, what="a call")
            function = call.get("function")
            if not isinstance(call.get("id"), str) or not call["id"]:
                self.problem(f"{where}.id", "Required: the call's id, which its tool message names.")
            if call.get("type", "function") != "function":
                self.problem(f"{where}.type", 'Must be "function".')
            if not isinstance(function, dict):
                self.problem(f"{where}.function", 'Required: {"name": ..., "arguments": "{...}"}.')
                continue
            if not isinstance(function.get("name"), str) or not function["name"]:
                self.problem(f"{where}.function.name", "Required: the tool's name.")
            arguments = function.get("arguments", "{}")
            if not isinstance(arguments, str):
                self.problem(f"{where}.function.arguments", "Must be the arguments as JSON text (a string).")
            calls.append(
                ToolCall(
                    index=index,
                    id=str(call.get("id") or ""),
                    name=str(function.get("name") or ""),
                    arguments=arguments if isinstance(arguments, str) else "",
                )
            )
        return calls

    def tool_result(
        self, item: Mapping[str, Any], path: str, messages: list[ImportedMessage], waiting: list[ToolCall]
    ) -> ImportedMessage | None:
        """A tool message, matched to the first call still waiting with its id (ids may repeat)."""
        text, _ = self.content(item.get("content"), f"{path}.content", images=False)
        call_id = item.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            self.problem(f"{path}.tool_call_id", "Required: the id of the call it answers.")
            return None
        call = next((call for call in waiting if call.id == call_id), None)
        if call is None:
            self.problem(
                f"{path}.tool_call_id",
                f"Answers no call: no tool call {_short(call_id)} of the answer before it is waiting for "
                "its result (results follow their answer's tool_calls).",
            )
            return None
        waiting.remove(call)
        answer = max(
            position for position, message in enumerate(messages) if message.role == MessageRole.ASSISTANT
        )
        return ImportedMessage(
            path=path,
            role=MessageRole.TOOL,
            text=text,
            answers=answer,
            call_index=call.index,
            tool_call_id=call_id,
        )

    def calls_unanswered(self, answer_path: str, waiting: list[ToolCall]) -> None:
        for call in waiting:
            self.problem(
                f"{answer_path}.tool_calls[{call.index}]",
                f"No tool message answers call {_short(call.id)}: every call's result follows its "
                "answer (only the last message may be an answer waiting for its results).",
            )

    # --- settings --------------------------------------------------------------------------------

    def ours(self, raw: Any) -> dict[str, Any]:
        """The `playground` key, checked (its setup fields are checked with the others)."""
        if raw is None:
            return {}
        at = f"$.{KEY}"
        if not isinstance(raw, dict):
            self.problem(at, "The playground's own settings: an object.")
            return {}
        self.unknown_keys(raw, at, OUR_KEYS, what=KEY)
        if raw.get("format") != FORMAT:
            self.problem(f"{at}.format", f'Must be "{FORMAT}".')
        elif raw.get("version") != FORMAT_VERSION:
            self.problem(f"{at}.version", f"This playground reads version {FORMAT_VERSION}.")
        title = raw.get("title", "")
        if not isinstance(title, str) or len(title) > TITLE_MAX_CHARS:
            self.problem(f"{at}.title", f"Text of at most {TITLE_MAX_CHARS} characters.")
        if not isinstance(raw.get("tool_mocks", {}), dict):
            self.problem(
                f"{at}.tool_mocks", 'An object: {"tool name": {"mocks": [...], "returns_json": false}}.'
            )
        self.variables(raw.get("variables", []), f"{at}.variables")
        return {key: value for key, value in raw.items() if key != "tool_mocks" or isinstance(value, dict)}

    def variables(self, raw: Any, path: str) -> None:
        """Carried as they are: a list of {"name", "type", "value"} (`Conversation.variables`)."""
        if not isinstance(raw, list):
            self.problem(path, 'An array of {"name", "type", "value"}.')
            return
        for index, variable in enumerate(raw):
            where = f"{path}[{index}]"
            if not isinstance(variable, dict):
                self.problem(where, 'A variable is {"name", "type", "value"}.')
                continue
            self.unknown_keys(variable, where, ("name", "type", "value"), what="a variable")
            if not isinstance(variable.get("name"), str) or not variable["name"]:
                self.problem(f"{where}.name", "Required: the variable's name.")
            if variable.get("type") not in VARIABLE_TYPES:
                self.problem(f"{where}.type", f"One of {', '.join(VARIABLE_TYPES)}.")
            if not isinstance(variable.get("value", ""), str):
                self.problem(f"{where}.value", "Must be text.")

    def parameters(self, body: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
        """The request fields that are the composer's parameters, by its names, and where each was."""
        parameters: dict[str, Any] = {}
        paths: dict[str, str] = {}
        for key, value in body.items():
            name = PARAMETER_ALIASES.get(key, key)
            if name not in PARAMETERS_BY_WIRE or value is None:
                continue
            if name in paths:
                self.problem(json_path([key]), f"Given twice (also as {paths[name].removeprefix('$.')}).")
                continue
            if name == "chat_template_kwargs":
                name, value = "thinking", self.thinking(value)
            else:
                name = PARAMETERS_BY_WIRE[name].name
            if name == "stop" and isinstance(value, str):
                value = [value]  # one sequence, as the composer stores them: a list
            parameters[name] = value
            paths[name] = json_path([key])
        return parameters, paths

    def thinking(self, kwargs: Any) -> Any:
        if not isinstance(kwargs, dict):
            self.problem("$.chat_template_kwargs", "Must be an object.")
            return None
        for key in kwargs:
            if key not in THINKING_KEYS:
                self.problem(
                    json_path(["chat_template_kwargs", key]),
                    f"Only the thinking switch ({' or '.join(sorted(THINKING_KEYS))}) is kept.",
                )
        return next((kwargs[key] for key in sorted(THINKING_KEYS) if key in kwargs), None)

    def tools(self, raw: Any, mocks: Mapping[str, Any]) -> Any:
        """`tools` with their mocks from `playground.tool_mocks` (by tool name), as stored."""
        if not isinstance(raw, list):
            return raw  # the setup check says what it must be
        named = set()
        tools: list[Any] = []
        for index, tool in enumerate(raw):
            if not isinstance(tool, dict):
                tools.append(tool)
                continue
            for key in LOCAL_KEYS:
                if key in tool:
                    self.problem(
                        f"$.tools[{index}].{key}",
                        f"Not an OpenAI key: the playground's own go under {KEY}.tool_mocks, by tool name.",
                    )
            function = tool.get("function")
            name = function.get("name") if isinstance(function, dict) else None
            if isinstance(name, str) and name in mocks:
                local = mocks[name]
                named.add(name)
                if not isinstance(local, dict):
                    self.problem(
                        json_path([KEY, "tool_mocks", name]), '{"mocks": [...], "returns_json": false}.'
                    )
                    local = {}
                self.unknown_keys(
                    local, json_path([KEY, "tool_mocks", name]), LOCAL_KEYS, what="a tool's mocks"
                )
                tool = {**tool, **{key: local[key] for key in LOCAL_KEYS if key in local}}
            tools.append(tool)
        for name in mocks:
            if name not in named:
                self.problem(json_path([KEY, "tool_mocks", name]), "There is no tool by this name in tools.")
        return tools


# Where a preset setup's fields sit in this document, when not at the top under their own name.
SETUP_FIELD_PATHS = {
    "connection": f"$.{KEY}.connection",
    "auto_mock_steps": f"$.{KEY}.auto_mock_steps",
    "affinity": f"$.{KEY}.use_affinity",
}
SETUP_PATH = re.compile(r"\$\.setup\.([a-z_]+)(.*)")


@dataclass(frozen=True)
class _SetupPaths:
    """Where each problem a preset file's check names (`$.setup.<field>...`) sits in this document."""

    system_path: str
    tools: Any
    parameters: Mapping[str, str]

    @staticmethod
    def field(path: str) -> str:
        match = SETUP_PATH.match(path)
        return match[1] if match else ""

    def of(self, path: str) -> str:
        match = SETUP_PATH.match(path)
        if match is None:
            return "$"
        name, tail = match.groups()
        if name == "system_prompt":
            return self.system_path + tail
        if name == "parameters":
            parameter = tail.removeprefix(".")
            return self.parameters.get(parameter, f"$.{parameter}")
        local = re.match(r"\[(\d+)\]\.(mocks|returns_json)(.*)", tail) if name == "tools" else None
        if local is not None:
            function = self.tools[int(local[1])].get("function", {})
            return json_path([KEY, "tool_mocks", function.get("name", "")]) + f".{local[2]}{local[3]}"
        return SETUP_FIELD_PATHS.get(name, f"$.{name}") + tail


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
