from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from playground.usage.models import UsageRecord


@admin.register(UsageRecord)
class UsageRecordAdmin(admin.ModelAdmin[UsageRecord]):
    """Read-only: records are facts about requests that happened."""

    list_display = [
        "created_at",
        "team",
        "model_id",
        "status",
        "prompt_tokens",
        "cached_tokens",
        "cache_write_tokens",
        "completion_tokens",
        "total_cost",
        "ttft_ms",
        "latency_ms",
    ]
    list_filter = ["status", "usage_source", "model_id"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
