"""The usage floor's tables: one row per request (`records`), the rollups the charts read
(`rollups`), the cache breaks found when records are written (`cache_breaks`), the budget
ledgers (`budgets`), the team API keys the gateway meters (`api_keys`), the scores people
and applications give records (`scores`) and the seals of routed records' decisions
(`routing_seals`). Django finds models through this module, so it names them all."""

from __future__ import annotations

from playground.usage.models.api_keys import KEY_PREFIX, KEY_STORE_MODES, TEAM_STORE_MODE, ApiKey
from playground.usage.models.budgets import (
    DEFAULT_ALERT_THRESHOLDS,
    BudgetAlert,
    BudgetLedger,
    BudgetReservation,
    TeamBudget,
    thresholds_validate,
)
from playground.usage.models.cache_breaks import UsageCacheBreak, UsageCacheBreakHourly
from playground.usage.models.records import (
    NullsLastIndex,
    RequestPath,
    UsageRecord,
    UsageSource,
    UsageStatus,
)
from playground.usage.models.retention import BodyRemoved, TeamRetention
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
from playground.usage.models.routing_seals import RoutingSeal, RoutingSealChain, SealKind
from playground.usage.models.scores import (
    COMMENT_MAX,
    NAME_MAX,
    RATING_MAX,
    RATING_MIN,
    Score,
    ScoreKind,
    ScoreOrigin,
)
from playground.usage.models.session_rollups import UsageSessionHourly, UsageSessionTotal

__all__ = [
    "COMMENT_MAX",
    "COST_SCALE",
    "DEFAULT_ALERT_THRESHOLDS",
    "HISTOGRAM_BUCKETS",
    "HISTOGRAM_EDGES_MS",
    "KEY_PREFIX",
    "KEY_STORE_MODES",
    "LATENCY_COLUMNS",
    "NAME_MAX",
    "RATING_MAX",
    "RATING_MIN",
    "TEAM_STORE_MODE",
    "TTFT_COLUMNS",
    "ApiKey",
    "BodyRemoved",
    "BudgetAlert",
    "BudgetLedger",
    "BudgetReservation",
    "CacheState",
    "NullsLastIndex",
    "RequestPath",
    "RoutingSeal",
    "RoutingSealChain",
    "Score",
    "ScoreKind",
    "ScoreOrigin",
    "SealKind",
    "TeamBudget",
    "TeamRetention",
    "UsageCacheBreak",
    "UsageCacheBreakHourly",
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
    "UsageSessionHourly",
    "UsageSessionTotal",
    "UsageSource",
    "UsageStatus",
    "UsageTeamDaily",
    "UsageTeamHourly",
    "rollup_filter_indexes",
    "thresholds_validate",
]
