"""A comparison, its columns, turns and answers, as compare's own names.

The classes are defined in `playground.chat.models`, where the app registry and the migrations
(app label `chat`, tables `chat_comparison`, `chat_comparisoncolumn`, `chat_comparisonturn` and
`chat_comparisonanswer`) find them: moving them would change nothing in the database but would
make `chat.models` import compare back. Compare's modules import them from here.
"""

from __future__ import annotations

from playground.chat.models import Comparison, ComparisonAnswer, ComparisonColumn, ComparisonTurn

__all__ = ["Comparison", "ComparisonAnswer", "ComparisonColumn", "ComparisonTurn"]
