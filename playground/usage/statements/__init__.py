"""Every hand-written SQL statement of the playground, one module per concern, and their one helper set.

Why they exist: on the gateway's hot path (issue 24) the ORM's work around a statement, not
the database's, was the cost (building and compiling a queryset took 0.3-1.2 ms of CPU where
the same statement through a cursor took 0.05 ms; admission went from 8.8 to about 1.5 ms).
Everything else keeps the ORM.

The rule that keeps them honest: names come from the models (quoted by the connection),
values go through each field's `get_db_prep_save`, rows come back through the ORM's own
converters (`raw_sql`), and each statement has one test (`tests/usage/statements/`) that it
reads or writes what the ORM would, run on SQLite and on PostgreSQL (the services profile).

Modules: `raw_sql` (the helpers, and `insert_many`, the records' group INSERT), `api_keys`
(a gateway request's key, team and connection), `admission` (the team and its limits),
`ledger` (the conditional hold, the ledger read by alerts), `settlement` (claiming
reservations, moving ledgers), `rollups` (the bucket upsert, the rebuild's INSERT ... SELECT
and its lock). Only `playground.usage` may import them (`.importlinter`).
"""

from __future__ import annotations
