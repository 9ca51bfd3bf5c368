"""Money as every page, message, e-mail and chart note writes it: one rule, one function.

The rule, for a FinOps reader comparing amounts across pages:

- US dollars, the sign before the dollar sign: `-$0.50`, and `+$0.50` when `signed`.
- A dollar or more, and zero: cents, thousands grouped: `$1,234.56`, `$0.00`.
- Under a dollar: three significant digits, at least cents, no trailing zeros past the
  cents: `$0.50`, `$0.0421`, `$0.123`, `$0.000137` (a request on a small model costs
  hundredths of a cent; cents would show it as `$0.00`).
- Exact: `Decimal` all the way (a float is read through its shortest repr), rounded half to
  even, never scientific notation.

A chart chooses its decimal places from the amounts drawn together (their axis and notes
must line up) and passes `places`: the amount is then shown to exactly that many places.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

SIGNIFICANT = 3
CENTS = 2


def money(amount: Decimal | float | int, *, places: int | None = None, signed: bool = False) -> str:
    """`amount` in US dollars by the module's rule; `places` fixes the decimal places."""
    value = amount if isinstance(amount, Decimal) else Decimal(str(amount))
    size = abs(value)
    shown_places = _places(size) if places is None else places
    shown = size.quantize(Decimal(1).scaleb(-shown_places), rounding=ROUND_HALF_EVEN)
    text = f"{shown:,.{shown_places}f}"
    if places is None and shown_places > CENTS:
        whole, _, fraction = text.partition(".")
        text = f"{whole}.{fraction.rstrip('0').ljust(CENTS, '0')}"
    sign = "" if not shown else "-" if value < 0 else "+" if signed else ""
    return f"{sign}${text}"


def _places(size: Decimal) -> int:
    if not size or size >= 1:
        return CENTS
    return max(CENTS, -size.adjusted() + SIGNIFICANT - 1)
