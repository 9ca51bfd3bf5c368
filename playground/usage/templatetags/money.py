"""`{{ amount|money }}`: money in templates by the one rule of `playground.usage.money`."""

from __future__ import annotations

from decimal import Decimal

from django import template

from playground.usage.money import money as money_text

register = template.Library()


@register.filter
def money(amount: Decimal | float | int | None) -> str:
    """The amount as `usage.money.money` writes it; nothing for no amount."""
    return "" if amount is None else money_text(amount)
