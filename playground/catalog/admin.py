from __future__ import annotations

from django.contrib import admin

from playground.catalog.models import CatalogModel, PriceCard


class PriceCardInline(admin.TabularInline[PriceCard, CatalogModel]):
    model = PriceCard
    extra = 0


@admin.register(CatalogModel)
class CatalogModelAdmin(admin.ModelAdmin[CatalogModel]):
    list_display = ["model_id", "display_name", "served_by", "context_window", "deprecated_on", "alias_of"]
    search_fields = ["model_id", "display_name"]
    inlines = [PriceCardInline]
