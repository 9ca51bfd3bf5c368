"""The model catalogue and dated price cards.

Reference data shared by every team (prices and capabilities are facts about the
provider, not about a team). Usage records point at the price card that priced them, so
history can be audited and re-priced when a card changes.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django.db import models


class CatalogModel(models.Model):
    model_id = models.CharField(max_length=200, unique=True, help_text="e.g. @cf/moonshotai/kimi-k2.5")
    display_name = models.CharField(max_length=120)
    # Which connection kinds can serve it (comma-separated ConnectionKind values).
    served_by = models.CharField(max_length=120, default="workers-ai")
    supports_vision = models.BooleanField(default=False)
    supports_tools = models.BooleanField(default=False)
    supports_json_schema = models.BooleanField(default=False)
    supports_json_schema_streaming = models.BooleanField(default=False)
    supports_batch = models.BooleanField(default=False)
    supports_reasoning = models.BooleanField(default=False)
    context_window = models.PositiveIntegerField(null=True, blank=True)
    deprecated_on = models.DateField(null=True, blank=True)
    alias_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="aliases"
    )
    # Priced with this model's card instead of one of its own (the embedded engine's model: what
    # its tokens would cost on Workers AI), following that model's alias once it retires.
    priced_as = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="priced_models"
    )
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["display_name"]

    def __str__(self) -> str:
        return self.model_id

    def is_retired_on(self, day: dt.date) -> bool:
        return self.deprecated_on is not None and day >= self.deprecated_on

    def retirement_text(self, day: dt.date) -> str:
        """ "retires on 2026-05-30" before that day, "retired on 2026-05-30; served as Kimi K2.6
        since" from it; "" for a model with no retirement date. Needs `alias_of` loaded."""
        if self.deprecated_on is None:
            return ""
        when = self.deprecated_on.isoformat()
        if not self.is_retired_on(day):
            then = f"; then served as {self.alias_of.display_name}" if self.alias_of else ""
            return f"retires on {when}{then}"
        since = f"; served as {self.alias_of.display_name} since" if self.alias_of else ""
        return f"retired on {when}{since}"


class PriceCard(models.Model):
    """USD per million tokens for one model from `effective_from` until the next card.

    A card with a team is that team's override (a negotiated rate): it prices the team's
    requests from `effective_from` to `effective_until` (inclusive; blank: open-ended) instead
    of the global card, and its label says so on every record it priced.
    """

    model = models.ForeignKey(CatalogModel, on_delete=models.CASCADE, related_name="price_cards")
    team = models.ForeignKey(
        "accounts.Team", null=True, blank=True, on_delete=models.CASCADE, related_name="price_overrides"
    )
    effective_from = models.DateField()
    effective_until = models.DateField(null=True, blank=True, help_text="Last day (overrides only)")
    input_per_m = models.DecimalField(max_digits=12, decimal_places=6)
    cached_input_per_m = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True, help_text="Blank: no cache discount"
    )
    cache_write_input_per_m = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        help_text="Blank: cache writes cost the input price",
    )
    output_per_m = models.DecimalField(max_digits=12, decimal_places=6)
    label = models.CharField(max_length=200, help_text="Where the price comes from, shown beside costs")
    source = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["model", "-effective_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["model", "effective_from"],
                condition=models.Q(team__isnull=True),
                name="one_price_card_per_model_day",
            ),
            models.UniqueConstraint(
                fields=["team", "model", "effective_from"],
                condition=models.Q(team__isnull=False),
                name="one_team_override_per_model_day",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model.model_id} from {self.effective_from}: {self.label}"

    @property
    def is_override(self) -> bool:
        return self.team_id is not None

    @property
    def effective_cached_input_per_m(self) -> Decimal:
        """Cached tokens cost the input price when the model has no cache discount."""
        return self.input_per_m if self.cached_input_per_m is None else self.cached_input_per_m

    @property
    def effective_cache_write_input_per_m(self) -> Decimal:
        """Tokens written to the cache cost the input price unless the card prices writes apart."""
        return self.input_per_m if self.cache_write_input_per_m is None else self.cache_write_input_per_m
