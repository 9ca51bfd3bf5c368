"""A readable diff of an answer against the item's expected output, word by word.

Both texts are cut into words, runs of spaces (newlines included, so lines keep their breaks)
and single punctuation marks; `difflib.SequenceMatcher` lines them up and the pieces read in
order: kept, removed (only in the expected output) and added (only in the answer). The pieces are
plain text: the template escapes them. Long texts are compared on their first `MAX_TOKENS`
tokens only (the matcher is quadratic at worst), and the diff says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Literal

MAX_TOKENS = 2_000
TOKENS = re.compile(r"\s+|\w+|[^\w\s]")

PieceKind = Literal["same", "removed", "added"]


@dataclass(frozen=True)
class Piece:
    kind: PieceKind
    text: str


@dataclass(frozen=True)
class Diff:
    pieces: list[Piece]
    same: bool  # the answer equals the expected output
    ratio: float  # how alike, in [0, 1]
    truncated: bool  # compared on the first MAX_TOKENS tokens of each

    @property
    def similarity(self) -> int:
        return round(100 * self.ratio)


def answer_diff(expected: str, answer: str) -> Diff | None:
    """The diff from `expected` to `answer`; None when there is no expected output to compare."""
    if not expected:
        return None
    old, new = TOKENS.findall(expected), TOKENS.findall(answer)
    truncated = len(old) > MAX_TOKENS or len(new) > MAX_TOKENS
    old, new = old[:MAX_TOKENS], new[:MAX_TOKENS]
    matcher = SequenceMatcher(None, old, new, autojunk=False)
    pieces: list[Piece] = []
    for op, old_start, old_stop, new_start, new_stop in matcher.get_opcodes():
        if op == "equal":
            _add(pieces, "same", old[old_start:old_stop])
            continue
        _add(pieces, "removed", old[old_start:old_stop])
        _add(pieces, "added", new[new_start:new_stop])
    return Diff(pieces=pieces, same=expected == answer, ratio=matcher.ratio(), truncated=truncated)


def _add(pieces: list[Piece], kind: PieceKind, tokens: list[str]) -> None:
    """Append `tokens` as one piece, joined to the last piece when it is of the same kind."""
    if not tokens:
        return
    text = "".join(tokens)
    if pieces and pieces[-1].kind == kind:
        pieces[-1] = Piece(kind, pieces[-1].text + text)
    else:
        pieces.append(Piece(kind, text))
