from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class UsageConfig(AppConfig):
    name = "playground.usage"

    def ready(self) -> None:
        from playground.catalog.models import CatalogModel, PriceCard
        from playground.usage.budgets.ledger import ledgers_forget
        from playground.usage.models import BudgetLedger
        from playground.usage.records import price_cards_forget

        for model in (PriceCard, CatalogModel):
            post_save.connect(price_cards_forget, sender=model, dispatch_uid=f"price-cards-{model.__name__}")
            post_delete.connect(
                price_cards_forget, sender=model, dispatch_uid=f"price-cards-{model.__name__}"
            )
        post_delete.connect(ledgers_forget, sender=BudgetLedger, dispatch_uid="budget-ledgers")
