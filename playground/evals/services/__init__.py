"""Evaluation writes: `datasets` (items, uploads, versions) and `experiments` (run, cancel)."""
