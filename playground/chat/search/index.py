"""The full-text index behind conversation search, in each database's own kind.

- **PostgreSQL**: two GIN expression indexes, on `to_tsvector('simple', …)` of the messages'
  text (its first `INDEXED_CHARS` characters: a tsvector holds at most 1 MB) and of the
  conversations' titles, ASCII punctuation read as spaces first (`_words_of`), so that
  "ops@example.com" holds the words ops, example and com, as SQLite's tokenizer reads it
  (PostgreSQL's parser would keep it as one lexeme, which "example" would not find).
  PostgreSQL keeps them up to date itself; the search query repeats the expressions word for
  word (`MESSAGE_VECTOR`, `TITLE_VECTOR`) so that the planner uses them.
- **SQLite**: two FTS5 tables over the same columns (external content: they hold the index,
  not a second copy of the text), kept up to date by triggers on insert, update and delete,
  as the FTS5 documentation describes.

Both read text the same simple way (lower case, no stemming, no stop words, accents kept), so a
word matches the same conversations on both profiles, in any language.

This is not a migration on purpose: Django's SQLite schema editor rebuilds a table for many
later changes (a new non-null column, an altered field) by copying it into a new one and
dropping the old, and the triggers go with the dropped table, silently. `search_index_ensure`
runs after every `migrate` (`ChatConfig.ready` connects it to `post_migrate`), creates what is
missing, and rebuilds the FTS index when any of it was, so a later migration of the chat
tables cannot leave search stale. Every statement is `IF NOT EXISTS`: a no-op once in place.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

INDEXED_CHARS = 100_000  # of each message, on PostgreSQL (the longest user message is as long)


def _words_of(column: str) -> str:
    """The column with ASCII punctuation (!-/ :-@ [-` {-~, the underscore too) as spaces: a
    locale-independent class, where [[:punct:]] would depend on the database's locale."""
    return rf"regexp_replace({column}, '[!-/:-@\[-`{{-~]+', ' ', 'g')"


MESSAGE_VECTOR = f"to_tsvector('simple'::regconfig, {_words_of(f'left(content, {INDEXED_CHARS})')})"
TITLE_VECTOR = f"to_tsvector('simple'::regconfig, {_words_of('title')})"

POSTGRES_INDEXES = {
    "chat_message_search": (
        f"CREATE INDEX IF NOT EXISTS chat_message_search ON chat_message USING gin ({MESSAGE_VECTOR})"
    ),
    "chat_conv_title_search": (
        f"CREATE INDEX IF NOT EXISTS chat_conv_title_search ON chat_conversation USING gin ({TITLE_VECTOR})"
    ),
}

# (FTS table, content table, indexed column)
FTS_TABLES = (
    ("chat_message_fts", "chat_message", "content"),
    ("chat_conversation_fts", "chat_conversation", "title"),
)
TOKENIZER = "unicode61 remove_diacritics 0"  # accents kept, as PostgreSQL's `simple` keeps them


def _sqlite_statements(fts: str, table: str, column: str) -> tuple[str, dict[str, str]]:
    """The FTS table and its three triggers (name -> statement)."""
    create = (
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {fts} USING fts5("
        f"{column}, content='{table}', content_rowid='id', tokenize='{TOKENIZER}')"
    )
    # Names from FTS_TABLES, never from input.
    add = f"INSERT INTO {fts}(rowid, {column}) VALUES (new.id, new.{column});"  # noqa: S608
    remove = f"INSERT INTO {fts}({fts}, rowid, {column}) VALUES ('delete', old.id, old.{column});"  # noqa: S608
    triggers = {
        f"{fts}_insert": f"AFTER INSERT ON {table} BEGIN {add} END",
        f"{fts}_delete": f"AFTER DELETE ON {table} BEGIN {remove} END",
        f"{fts}_update": f"AFTER UPDATE OF {column} ON {table} BEGIN {remove} {add} END",
    }
    return create, {name: f"CREATE TRIGGER IF NOT EXISTS {name} {body}" for name, body in triggers.items()}


def search_index_ensure(connection: BaseDatabaseWrapper) -> list[str]:
    """Create whatever part of the index is missing; returns the names created (empty: all there)."""
    if connection.vendor == "postgresql":
        return _postgres_ensure(connection)
    if connection.vendor == "sqlite":
        return _sqlite_ensure(connection)
    return []  # another database: search falls back to a scan (`chat.search.matching`)


def search_index_drop(connection: BaseDatabaseWrapper) -> None:
    """Drop the index (a bulk load then `search_index_ensure` builds it once, as the benchmark does)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            for name in POSTGRES_INDEXES:
                cursor.execute(f"DROP INDEX IF EXISTS {name}")
        elif connection.vendor == "sqlite":
            for fts, table, column in FTS_TABLES:
                _, triggers = _sqlite_statements(fts, table, column)
                for name in triggers:
                    cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
                cursor.execute(f"DROP TABLE IF EXISTS {fts}")


def _postgres_ensure(connection: BaseDatabaseWrapper) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE indexname = ANY(%s)", [list(POSTGRES_INDEXES)])
        present = {row[0] for row in cursor.fetchall()}
        missing = [name for name in POSTGRES_INDEXES if name not in present]
        for name in missing:
            cursor.execute(POSTGRES_INDEXES[name])
    return missing


def _sqlite_ensure(connection: BaseDatabaseWrapper) -> list[str]:
    created: list[str] = []
    with connection.cursor() as cursor:
        for fts, table, column in FTS_TABLES:
            create, triggers = _sqlite_statements(fts, table, column)
            missing = [name for name in (fts, *triggers) if not _sqlite_exists(cursor, name)]
            if not missing:
                continue
            cursor.execute(create)
            for statement in triggers.values():
                cursor.execute(statement)
            # Rows written while a trigger was missing are not in the index: read them all again.
            cursor.execute(f"INSERT INTO {fts}({fts}) VALUES ('rebuild')")  # noqa: S608 (our names)
            created += missing
    return created


def _sqlite_exists(cursor: Any, name: str) -> bool:
    cursor.execute("SELECT 1 FROM sqlite_master WHERE name = %s", [name])
    return cursor.fetchone() is not None
