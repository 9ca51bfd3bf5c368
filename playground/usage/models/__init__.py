"""The usage floor's tables: one row per request (`records`), the rollups the charts read
(`rollups`), the budget ledgers (`budgets`) and the team API keys the gateway meters
(`api_keys`). Django finds models through this module, so
it names them all."""

from __future__ import annotations

from playground.usage.models.api_keys import KEY_PREFIX, ApiKey
from playground.usage.models.budgets import (
    DEFAULT_ALERT_THRESHOLDS,
    BudgetAlert,
    BudgetLedger,
    BudgetReservation,
    TeamBudget,
    thresholds_validate,
)
from playground.usage.models.records import (
    NullsLastIndex,
    RequestPath,
    UsageRecord,
    UsageSource,
    UsageStatus,
)
from playground.usage.models.rollups import (
    COST_SCALE,
    HISTOGRAM_BUCKETS,
    HISTOGRAM_EDGES_MS,
    LATENCY_COLUMNS,
    TTFT_COLUMNS,
    CacheState,
    UsageConversationDaily,
    UsageConversationTotal,
    UsageDaily,
    UsageEndUserDaily,
    UsageEndUserHourly,
    UsageHourly,
    UsageKeyDaily,
    UsageKeyHourly,
    UsagePeopleBase,
    UsagePeopleDaily,
    UsagePeopleHourly,
    UsagePresetDaily,
    UsagePresetHourly,
    UsageRollupBase,
    UsageRollupMeasures,
    UsageTeamDaily,
    UsageTeamHourly,
    rollup_filter_indexes,
)

__all__ = [
    "COST_SCALE",
    "DEFAULT_ALERT_THRESHOLDS",
    "HISTOGRAM_BUCKETS",
    "HISTOGRAM_EDGES_MS",
    "KEY_PREFIX",
    "LATENCY_COLUMNS",
    "TTFT_COLUMNS",
    "ApiKey",
    "BudgetAlert",
    "BudgetLedger",
    "BudgetReservation",
    "CacheState",
    "NullsLastIndex",
    "RequestPath",
    "TeamBudget",
    "UsageConversationDaily",
    "UsageConversationTotal",
    "UsageDaily",
    "UsageEndUserDaily",
    "UsageEndUserHourly",
    "UsageHourly",
    "UsageKeyDaily",
    "UsageKeyHourly",
    "UsagePeopleBase",
    "UsagePeopleDaily",
    "UsagePeopleHourly",
    "UsagePresetDaily",
    "UsagePresetHourly",
    "UsageRecord",
    "UsageRollupBase",
    "UsageRollupMeasures",
    "UsageSource",
    "UsageStatus",
    "UsageTeamDaily",
    "UsageTeamHourly",
    "rollup_filter_indexes",
    "thresholds_validate",
]
