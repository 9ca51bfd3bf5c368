"""Chat templates: turns -> the prompt text a model was trained on.

A template is Jinja, rendered in llama-cpp-python's sandboxed environment. It comes from
`--chat-format` (a built-in name or a file) or from the GGUF's own metadata. Some models,
Gemma among them, have no system role; for those the system prompt is folded into the
first user turn here, so it always reaches the model and is counted in `prompt_tokens`.
Whether a template has a system role is found by rendering a probe, not by a name list.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from jinja2 import TemplateError
from llama_cpp.llama_chat_format import (
    CHATML_CHAT_TEMPLATE,
    LLAMA3_INSTRUCT_CHAT_TEMPLATE,
    MISTRAL_INSTRUCT_CHAT_TEMPLATE,
    Jinja2ChatFormatter,
)

from playground.engine.errors import invalid_input
from playground.engine.messages import Turn

# Gemma's turn format. Its official template folds a system message into the first user
# turn itself; this one leaves that to `fold_system` so every template is treated alike.
GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}"
    "{{ raise_exception('Gemma has no system role') }}"
    "{% endif %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)

BUILTIN_TEMPLATES = {
    "gemma": GEMMA_CHAT_TEMPLATE,
    "chatml": CHATML_CHAT_TEMPLATE,
    "llama-3": LLAMA3_INSTRUCT_CHAT_TEMPLATE,
    "mistral-instruct": MISTRAL_INSTRUCT_CHAT_TEMPLATE,
}

_PROBE = "system-role-probe-7f3a"


class ChatTemplateError(ValueError):
    """No usable chat template: the GGUF has none and none was configured."""


def template_source(chat_format: str, metadata: Mapping[str, str]) -> str:
    if chat_format in BUILTIN_TEMPLATES:
        return BUILTIN_TEMPLATES[chat_format]
    if chat_format:
        path = Path(chat_format)
        if not path.is_file():
            names = ", ".join(BUILTIN_TEMPLATES)
            raise ChatTemplateError(
                f"Chat format {chat_format!r} is neither one of {names} nor a Jinja file."
            )
        return path.read_text()
    if "tokenizer.chat_template" in metadata:
        return metadata["tokenizer.chat_template"]
    raise ChatTemplateError("This GGUF has no chat template; set ENGINE_CHAT_FORMAT (e.g. chatml).")


def fold_system(turns: list[Turn]) -> list[Turn]:
    """Move a leading system turn into the first user turn (making one if there is none)."""
    if not turns or turns[0]["role"] != "system":
        return turns
    system, rest = turns[0]["content"], turns[1:]
    if rest and rest[0]["role"] == "user":
        return [{"role": "user", "content": f"{system}\n\n{rest[0]['content']}"}, *rest[1:]]
    return [{"role": "user", "content": system}, *rest]


class ChatTemplate:
    def __init__(self, source: str, *, bos_token: str, eos_token: str) -> None:
        self._formatter = Jinja2ChatFormatter(template=source, bos_token=bos_token, eos_token=eos_token)
        self.has_system_role = self._renders_system_role()

    def render(self, turns: list[Turn]) -> str:
        messages = turns if self.has_system_role else fold_system(turns)
        try:
            return self._formatter(messages=messages).prompt  # type: ignore[arg-type]
        except (ValueError, TemplateError) as exc:
            raise invalid_input(f"The model's chat template rejected these messages: {exc}") from exc

    def _renders_system_role(self) -> bool:
        probe = [{"role": "system", "content": _PROBE}, {"role": "user", "content": "hi"}]
        try:
            return _PROBE in self._formatter(messages=probe).prompt  # type: ignore[arg-type]
        except (ValueError, TemplateError):
            return False
