"""Reads of the Usage pages, one module per idea; callers import from the module that holds the name.

- `rollups`: which rollup table a filter reads, its rows and buckets, the span charts draw;
  shared by the dashboard's selectors, which scan no raw usage row.
- `totals`: the headline figures and the request log's totals row.
- `chart_series`, `conversations`, `what_if`: the rows of the dashboard's charts.
- `hit_ratio`, `runway`, `session_labels`: the session sections (raw records, bounded; the
  runway itself is `usage.insights.runway`).
- `attribution`: the gateway's rankings, cost by API key and by end user (rollups by key).
- `scores`: the mean rating and thumbs-up share of each preset version (the records' scores).
- `request_log`: the raw records of the request log: filtered, sorted, keyset-paginated, exported.
"""
