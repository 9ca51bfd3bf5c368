from __future__ import annotations

from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "playground.catalog"
