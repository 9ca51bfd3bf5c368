"""Batch writes, one module per idea; callers import from the module that holds the name.

- `drafts`: a checked input stored as a draft, its path and its estimate.
- `actions`: what a user does to a batch (confirm, discard, cancel, retry).
- `chain`: who owns a running batch (token, lease, heartbeat), the watchdog and the nudge.
- `step`: one step of the chain, handing over to the batch's path.
- `concurrent_path` and `queue_path` (with `queue_results`): the two ways items are sent.
- `metered_item`: one item's answer, metered, with its record and result stored together.

docs/architecture.md draws the states and who moves them.
"""
