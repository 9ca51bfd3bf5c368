"""Dollar amounts as budget refusals, alert e-mails and the banner write them."""

from __future__ import annotations

from decimal import Decimal


def usd_text(amount: Decimal) -> str:
    """Dollars for budget messages: cents from a cent up, else enough digits to be non-zero."""
    if amount >= Decimal("0.01") or amount == 0:
        return f"${amount:,.2f}"
    return "$" + f"{amount:.6f}".rstrip("0")
