"""One replica's generation loop over a llama-cpp-python model, with prefix-cache reuse.

The loop drives llama.cpp directly (eval, a sampler chain, sequence state) rather than
`Llama.create_chat_completion`, for three reasons: `cached_tokens` must be the number
of prompt tokens whose KV was actually kept, which only the code that trims the KV
knows; cancellation must be checked between tokens; and the output grammar has to be
dropped as soon as an `auto` tool choice turns out to be a plain text answer.
"""

from __future__ import annotations

import ctypes
import logging
import secrets
from collections.abc import Callable

import llama_cpp
import numpy as np

from playground.engine.answer_writer import AnswerWriter
from playground.engine.errors import INTERNAL, EngineError, invalid_input
from playground.engine.prefix_cache import CachedState, PrefixCache, Tokens, common_prefix_length
from playground.engine.prompts import PromptTokenizer
from playground.engine.protocol import Event, Failed, Finished, GenerationSpec, Started

logger = logging.getLogger(__name__)

SEQUENCE = 0  # the one llama.cpp sequence a replica uses


class Sampler:
    """A llama.cpp sampler chain: the grammar (if any) first, then the usual filters."""

    def __init__(
        self,
        vocab: llama_cpp.llama_vocab_p,
        *,
        grammar: str | None,
        temperature: float,
        top_p: float,
        seed: int,
    ) -> None:
        self._chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        if grammar is not None:
            constraint = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
            if not constraint:
                self.close()
                raise invalid_input("The output grammar built from the request could not be compiled.")
            self._add(constraint)
        if temperature == 0:
            self._add(llama_cpp.llama_sampler_init_greedy())
        else:
            self._add(llama_cpp.llama_sampler_init_top_k(64))
            self._add(llama_cpp.llama_sampler_init_top_p(top_p, 1))
            self._add(llama_cpp.llama_sampler_init_min_p(0.05, 1))
            self._add(llama_cpp.llama_sampler_init_temp(temperature))
            self._add(llama_cpp.llama_sampler_init_dist(seed))

    def _add(self, sampler: llama_cpp.llama_sampler_p) -> None:
        llama_cpp.llama_sampler_chain_add(self._chain, sampler)

    def sample(self, ctx: llama_cpp.llama_context_p) -> int:
        return int(llama_cpp.llama_sampler_sample(self._chain, ctx, -1))

    def close(self) -> None:
        if self._chain is not None:
            llama_cpp.llama_sampler_free(self._chain)
            self._chain = None


class Generator:
    def __init__(self, llm: llama_cpp.Llama, prompts: PromptTokenizer, cache: PrefixCache) -> None:
        self.llm = llm
        self.prompts = prompts
        self.cache = cache
        self.vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self.n_ctx = llm.n_ctx()
        self._memory = llama_cpp.llama_get_memory(llm.ctx)
        self._live_scope = ""  # the cache scope of the sequence in the KV now

    def run(self, spec: GenerationSpec, emit: Callable[[Event], None], cancelled: Callable[[], bool]) -> None:
        """Answer one job; always ends with exactly one `Finished` or `Failed` event."""
        try:
            finished = self._generate(spec, emit, cancelled)
        except EngineError as exc:
            emit(Failed(exc.code, exc.status, exc.message))
        except Exception:
            logger.exception("generation failed")
            self.forget()
            emit(Failed(INTERNAL, 500, "The model failed while generating; see the engine log."))
        else:
            emit(finished)
            # Saving the KV state copies tens of megabytes: do it after the client has its answer.
            self._remember()

    def forget(self) -> None:
        """Drop the live sequence, so the next job starts from an empty KV."""
        llama_cpp.llama_memory_clear(self._memory, True)
        self.llm.n_tokens = 0

    def _generate(
        self, spec: GenerationSpec, emit: Callable[[Event], None], cancelled: Callable[[], bool]
    ) -> Event:
        answer = AnswerWriter(spec, emit, self._count_tokens)
        answer.check_room()  # before Started, so a stream is refused with a 400 too
        tokens = self.prompts.tokens(spec.messages)
        if len(tokens) >= self.n_ctx:
            raise invalid_input(
                f"The prompt is {len(tokens)} tokens long, but the context window is {self.n_ctx} tokens; "
                "shorten the conversation."
            )
        cached = self._reuse_prefix(tokens, spec.cache_scope)
        emit(Started(prompt_tokens=len(tokens), cached_tokens=cached))
        if not self._prefill(tokens, cached, cancelled):
            return Finished("cancelled", len(tokens), 0, cached)
        seed = secrets.randbits(32) if spec.seed is None else spec.seed
        free = Sampler(self.vocab, grammar=None, temperature=spec.temperature, top_p=spec.top_p, seed=seed)
        constrained = (
            Sampler(
                self.vocab, grammar=spec.grammar, temperature=spec.temperature, top_p=spec.top_p, seed=seed
            )
            if spec.grammar
            else None
        )
        completion: list[int] = []
        reason = "length"
        try:
            for step in range(min(spec.max_tokens, self.n_ctx - len(tokens))):
                if step:
                    self.llm.eval([completion[-1]])
                if cancelled():
                    reason = "cancelled"
                    break
                # An `auto` answer keeps the grammar only until it is known to be text.
                sampler = constrained if constrained and answer.mode != "text" else free
                token = sampler.sample(self.llm.ctx)
                if llama_cpp.llama_vocab_is_eog(self.vocab, token):
                    reason = "stop"
                    break
                piece = self.llm.detokenize([token], prev_tokens=completion)
                if not answer.fits(piece, len(completion) + 1):
                    break  # the rest of max_tokens is the room a JSON answer needs to close
                completion.append(token)
                if answer.feed(piece):
                    reason = "stop"
                    break
        finally:
            free.close()
            if constrained:
                constrained.close()
        reason = answer.finish(reason)
        completion_tokens = len(completion) + answer.closing_tokens
        return Finished(reason, len(tokens), completion_tokens, cached, answer.closed_early)

    def _count_tokens(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode(), add_bos=False, special=False)) if text else 0

    def _reuse_prefix(self, tokens: Tokens, scope: str) -> int:
        """Keep the longest prefix of `tokens` already in the KV (live or from `scope`'s cache).

        Returns the number of prompt tokens whose KV is kept: that is `cached_tokens`. At
        least one prompt token is always evaluated, because sampling needs fresh logits.
        The live KV counts only when the job before this one had the same scope.
        """
        live = 0
        if scope == self._live_scope:
            live = common_prefix_length(self.llm.input_ids[: self.llm.n_tokens], tokens)
        self._live_scope = scope
        entry, cached = self.cache.best_match(scope, tokens)
        if entry is not None and cached > live:
            live = cached if self._restore(entry) else 0
        keep = min(live, len(tokens) - 1)
        if not llama_cpp.llama_memory_seq_rm(self._memory, SEQUENCE, keep, -1):
            self.forget()  # this model's KV cannot be trimmed in place
            return 0
        self.llm.n_tokens = keep
        return keep

    def _prefill(self, tokens: Tokens, start: int, cancelled: Callable[[], bool]) -> bool:
        for begin in range(start, len(tokens), self.llm.n_batch):
            if cancelled():
                return False
            self.llm.eval(tokens[begin : begin + self.llm.n_batch].tolist())
        return True

    def _remember(self) -> None:
        """Save the live sequence (prompt + answer) so a later turn can continue from it."""
        n_tokens = self.llm.n_tokens
        if n_tokens == 0:
            return
        size = llama_cpp.llama_state_seq_get_size(self.llm.ctx, SEQUENCE)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(self.llm.ctx, buffer, size, SEQUENCE)
        if written:
            self.cache.put(
                self._live_scope,
                np.array(self.llm.input_ids[:n_tokens], dtype=np.intc),
                ctypes.string_at(buffer, written),
            )

    def _restore(self, entry: CachedState) -> bool:
        buffer = (ctypes.c_uint8 * len(entry.data)).from_buffer_copy(entry.data)
        llama_cpp.llama_memory_clear(self._memory, True)
        if not llama_cpp.llama_state_seq_set_data(self.llm.ctx, buffer, len(entry.data), SEQUENCE):
            logger.warning("could not restore a cached KV state; evaluating the prompt in full")
            self.forget()
            return False
        self.llm.input_ids[: len(entry.tokens)] = entry.tokens
        self.llm.n_tokens = len(entry.tokens)
        return True
