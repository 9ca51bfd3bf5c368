"""A chat's prompt as its model reads it: the turns rendered by the chat template, then tokenized.

One `PromptTokenizer` does both for a replica's generator (the tokens it evaluates and reports
as `prompt_tokens`) and for the tokenize route (a count before anything is sent), so a count
cannot differ from what the request would be billed at. The route's copy lives in the front
end and holds the vocabulary alone (`vocabulary_tokenizer`: no weights, no context, tens of
megabytes), so counting never waits for a replica.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import llama_cpp
import numpy as np
from llama_cpp._internals import LlamaModel

from playground.engine.messages import Turn
from playground.engine.prefix_cache import Tokens
from playground.engine.templates import ChatTemplate, template_source


class Vocabulary(Protocol):
    """What a loaded `llama_cpp.Llama` and a vocabulary-only `LlamaModel` both offer."""

    def tokenize(self, text: bytes, add_bos: bool, special: bool) -> list[int]: ...

    def detokenize(self, tokens: list[int], *, special: bool) -> bytes: ...


class PromptTokenizer:
    def __init__(self, vocabulary: Vocabulary, model: llama_cpp.llama_model_p, template: str) -> None:
        """`model`: the llama.cpp model `vocabulary` belongs to; `template`: its chat template's
        source (`templates.template_source`)."""
        vocab = llama_cpp.llama_model_get_vocab(model)
        self._vocabulary = vocabulary
        self._bos = int(llama_cpp.llama_vocab_bos(vocab))
        self._add_bos = bool(llama_cpp.llama_vocab_get_add_bos(vocab))
        self.template = ChatTemplate(
            template,
            bos_token=self._text(self._bos),
            eos_token=self._text(int(llama_cpp.llama_vocab_eos(vocab))),
        )

    def tokens(self, turns: list[Turn]) -> Tokens:
        """The prompt of `turns`, with the BOS token the model expects first."""
        prompt = self.template.render(turns)
        tokens = self._vocabulary.tokenize(prompt.encode(), add_bos=False, special=True)
        if self._add_bos and (not tokens or tokens[0] != self._bos):
            tokens.insert(0, self._bos)
        return np.array(tokens, dtype=np.intc)

    def _text(self, token: int) -> str:
        return self._vocabulary.detokenize([token], special=True).decode()


def vocabulary_tokenizer(path: Path, chat_format: str) -> PromptTokenizer:
    """The prompt tokenizer of the GGUF at `path`, its vocabulary loaded without the weights."""
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = LlamaModel(path_model=str(path), params=params, verbose=False)
    return PromptTokenizer(model, model.model, template_source(chat_format, model.metadata()))
