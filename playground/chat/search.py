"""Conversation search: the ids of conversations whose title or any message holds every word
typed, through the database's own full-text index (`chat.search_index`).

Every word is matched as a prefix ("helsin" finds "Helsinki"), so the quick switcher finds a
conversation while its name is still being typed. All the words must appear together, in the
title or in one message: each index then intersects its own lists of rows in one lookup,
which keeps a search with one rare word among common ones as fast as the rare word alone. Scoping to the user's teams, order and
pages are the selector's (`chat.selectors.conversation_search`): this module only says which
conversations match, as a subquery the selector filters on.
"""

from __future__ import annotations

import re
from functools import reduce
from operator import and_

from django.db import connection
from django.db.models import Exists, OuterRef, Q
from django.db.models.expressions import RawSQL

from playground.chat.models import Message
from playground.chat.search_index import MESSAGE_VECTOR, TITLE_VECTOR

MAX_TERMS = 8
MAX_QUERY_CHARS = 200
# Letters and digits, as SQLite's unicode61 tokenizer reads words (an underscore separates them).
_WORD = re.compile(r"[^\W_]+")


def search_terms(text: str) -> list[str]:
    """The words of a query, lower-cased, at most `MAX_TERMS` (duplicates dropped)."""
    words = _WORD.findall(text[:MAX_QUERY_CHARS].lower())
    return list(dict.fromkeys(words))[:MAX_TERMS]


def matching_conversations(text: str) -> RawSQL | Q | None:
    """What a conversation must satisfy to match `text`: a `pk__in` subquery on PostgreSQL and
    SQLite, a scan of titles and messages elsewhere; None when `text` holds no word."""
    if connection.vendor == "postgresql":
        return _postgres(text)
    terms = search_terms(text)
    if not terms:
        return None
    if connection.vendor == "sqlite":
        return _sqlite(terms)
    return _scan(terms)


def _postgres(text: str) -> RawSQL | None:
    """PostgreSQL reads the query with the parser that read the text, so "example.com" or
    "e-mail" are the same lexemes in both; each lexeme then matches as a prefix."""
    lexemes = _postgres_lexemes(text[:MAX_QUERY_CHARS])[:MAX_TERMS]
    if not lexemes:
        return None
    query = " & ".join("'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "':*" for lexeme in lexemes)
    sql = (
        f"SELECT conversation_id FROM chat_message WHERE {MESSAGE_VECTOR} @@ to_tsquery('simple', %s) "
        f"UNION SELECT id FROM chat_conversation WHERE {TITLE_VECTOR} @@ to_tsquery('simple', %s)"
    )
    return RawSQL(sql, [query, query])


def _postgres_lexemes(text: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT lexeme FROM unnest(to_tsvector('simple', %s))", [text])
        return [row[0] for row in cursor.fetchall()]


def _sqlite(terms: list[str]) -> RawSQL:
    """One FTS5 MATCH per table: `"a"* "b"*` (every word, each as a prefix)."""
    match = " ".join(f'"{term}"*' for term in terms)
    sql = (
        "SELECT m.conversation_id FROM chat_message_fts f JOIN chat_message m ON m.id = f.rowid "
        "WHERE chat_message_fts MATCH %s "
        "UNION SELECT rowid FROM chat_conversation_fts WHERE chat_conversation_fts MATCH %s"
    )
    return RawSQL(sql, [match, match])


def _scan(terms: list[str]) -> Q:
    """The fallback for a database with no full-text index here (neither profile uses it): a
    scan of every title and message, with the same rule (every word in the title or one message)."""
    every = [Q(content__icontains=term) for term in terms]
    in_title = reduce(and_, (Q(title__icontains=term) for term in terms))
    return in_title | Q(Exists(Message.objects.filter(reduce(and_, every), conversation_id=OuterRef("pk"))))
