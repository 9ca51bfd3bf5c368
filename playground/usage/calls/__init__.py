"""The metered call, in its parts: every upstream request the playground sends goes through it.

`call` (reserve → stream → meter → settle: `MeteredCall`), `context` (who sent what, where:
`RequestContext`), `budget` (who holds the budget, and when: an explicit value), `settlement`
(the record written alone with what the feature keeps, or grouped with the calls ending
meanwhile: an explicit value) and `kinds` (one builder per cause: chat turn, compare column,
batch item, gateway request). The builders take ids and plain values: the usage floor never
imports the features that call it.

Nothing is re-exported here: `budgets` imports `calls.context`, and `calls.call` imports
`budgets`, so importing the package must not import its modules.
"""

from __future__ import annotations
