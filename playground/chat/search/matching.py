"""Conversation search: which conversations' title or one message holds every word typed,
through the database's own full-text index (`chat.search.index`).

Every word is matched as a prefix ("helsin" finds "Helsinki"), so the quick switcher finds a
conversation while its name is still being typed. All the words must appear together, in the
title or in one message: each index then intersects its own lists of rows in one lookup.

Two ways to the same answer (`chat.selectors.conversation_search` picks): a full-text index
returns every matching conversation, whatever its team, and its cost follows their number:
tens of milliseconds for a rare word, seconds for "the" among 800,000 conversations. So the
newest conversations of the user's teams are checked first (`recent_matches`), a few
thousand rows read down the list's own index; a word common enough to fill a page there is
answered from them, and only rarer words go to the index (`matching_conversation_ids`), where
they are cheap.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import reduce
from operator import and_

from django.db import connection
from django.db.models import BooleanField, Exists, OuterRef, Q
from django.db.models.expressions import RawSQL

from playground.chat.models import Conversation, Message
from playground.chat.search.index import MESSAGE_VECTOR, TITLE_VECTOR

MAX_TERMS = 8
MAX_QUERY_CHARS = 200
# Letters and digits: how both indexes split text into words (punctuation and "_" separate them).
_WORD = re.compile(r"[^\W_]+")


def search_terms(text: str) -> list[str]:
    """The words of a query, lower-cased, at most `MAX_TERMS` (duplicates dropped)."""
    words = _WORD.findall(text[:MAX_QUERY_CHARS].lower())
    return list(dict.fromkeys(words))[:MAX_TERMS]


def text_matches(text: str, terms: Sequence[str]) -> bool:
    """Whether `text` holds every term as the start of one of its words (as the indexes read it)."""
    words = set(_WORD.findall(text.lower()))
    return all(any(word.startswith(term) for word in words) for term in terms)


def matching_conversation_ids(terms: Sequence[str]) -> list[int]:
    """Every conversation, of any team, whose title or one message holds all `terms`, from the
    index (PostgreSQL, SQLite; a scan elsewhere, which neither profile uses). Ids, not a
    subquery: joined to the conversations, PostgreSQL's planner preferred reading the whole
    table to looking up a few thousand rows (300 ms against 20 for a word in 1 % of 800,000)."""
    # The SQL below is constant text; what the user typed goes in as parameters only.
    if connection.vendor == "postgresql":
        query = _tsquery(terms)
        sql = (
            f"SELECT conversation_id FROM chat_message WHERE {MESSAGE_VECTOR} @@ to_tsquery('simple', %s) "  # noqa: S608
            f"UNION SELECT id FROM chat_conversation WHERE {TITLE_VECTOR} @@ to_tsquery('simple', %s)"
        )
        params = [query, query]
    elif connection.vendor == "sqlite":
        match = " ".join(f'"{term}"*' for term in terms)  # FTS5: every word, each as a prefix
        sql = (
            "SELECT m.conversation_id FROM chat_message_fts f JOIN chat_message m ON m.id = f.rowid "
            "WHERE chat_message_fts MATCH %s "
            "UNION SELECT rowid FROM chat_conversation_fts WHERE chat_conversation_fts MATCH %s"
        )
        params = [match, match]
    else:
        return list(Conversation.objects.filter(_scan(terms)).values_list("pk", flat=True))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def recent_matches(ids: Sequence[int], terms: Sequence[str]) -> set[int]:
    """Those of the conversations `ids` (a few thousand at most) that match `terms`.

    Their rows are read by conversation, never through the index: a substring filter (LIKE,
    cheap) keeps the candidates, and each is then checked exactly, by the index's own
    expression on PostgreSQL, by `text_matches` here otherwise (SQLite's FTS5 would expand
    a prefix again for every row it is asked about). SQLite's LIKE folds the case of ASCII
    letters only, so there a capitalised non-ASCII word ("Äpfel" for "äpfel") is found by
    the index but can be missed among the newest conversations when a page of others match."""
    if not ids:
        return set()
    like = reduce(and_, (Q(content__icontains=term) for term in terms))
    titled = reduce(and_, (Q(title__icontains=term) for term in terms))
    messages = Message.objects.filter(like, conversation_id__in=ids)
    titles = Conversation.objects.filter(titled, pk__in=ids)
    if connection.vendor == "postgresql":
        query = _tsquery(terms)
        boolean = BooleanField()
        exact = RawSQL(f"{MESSAGE_VECTOR} @@ to_tsquery('simple', %s)", [query], output_field=boolean)  # noqa: S611
        exact_title = RawSQL(f"{TITLE_VECTOR} @@ to_tsquery('simple', %s)", [query], output_field=boolean)  # noqa: S611
        found = set(messages.filter(exact).values_list("conversation_id", flat=True))
        return found | set(titles.filter(exact_title).values_list("pk", flat=True))
    found = {
        pk
        for pk, content in messages.values_list("conversation_id", "content")
        if text_matches(content, terms)
    }
    return found | {pk for pk, title in titles.values_list("pk", "title") if text_matches(title, terms)}


def _tsquery(terms: Sequence[str]) -> str:
    """`'a':* & 'b':*`; terms are letters and digits only, so nothing needs quoting inside."""
    return " & ".join(f"'{term}':*" for term in terms)


def _scan(terms: Sequence[str]) -> Q:
    """The fallback for a database with no full-text index here: a scan of every title and
    message, with the same rule (every word in the title or in one message), as substrings."""
    every = [Q(content__icontains=term) for term in terms]
    in_title = reduce(and_, (Q(title__icontains=term) for term in terms))
    return in_title | Q(Exists(Message.objects.filter(reduce(and_, every), conversation_id=OuterRef("pk"))))
