"""Money as a marketplace takes it (contract 14): ``Decimal`` throughout, never rounded silently.

A price the marketplace cannot take as it is (kopecks where only whole roubles go, more
decimals than it keeps, ``0`` where it refuses zero, a negative price) is ``invalid-for-channel``
unless the channel's ``rounding`` says how (``half-up`` or ``down``); rounding never turns a
refused zero into a price nor a price into a refused zero unnoticed. An exact value written with
more decimals than the field keeps ("500.5000", "1500.00" for whole roubles) goes at the
field's scale ("500.50", "1500"): the same value, never rounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal

ROUNDINGS = {"half-up": ROUND_HALF_UP, "down": ROUND_DOWN}


@dataclass(frozen=True, slots=True)
class Money:
    """What one field of a marketplace takes: at most ``places`` decimals, zero or not."""

    places: int = 2
    zero: bool = False  # whether 0 is a value the field takes (Ozon's old_price "0" clears it)
    # The largest amount the field takes (Yandex's minimumForBestseller: 100 000 000), None:
    # no such bound. A field's own range, whatever the other prices: refused at once, never
    # waited on as a rule of two price types (review rev43b W3).
    most: Decimal | None = None

    def fit(self, amount: Decimal, rounding: str = "none") -> Decimal | str:
        """The amount as it is sent, or why it cannot be (one line, for the quarantine)."""
        if not amount.is_finite():
            return f"{amount} is not a price"
        if amount < 0:
            return f"{amount} is negative"
        step = Decimal(1).scaleb(-self.places)
        exact = amount.quantize(step, rounding=ROUND_DOWN) == amount
        sent = amount
        exponent = amount.as_tuple().exponent
        if exact and isinstance(exponent, int) and exponent < -self.places:
            # Exactly a value of the field's scale, written with trailing zeros (1C's
            # "500.5000"): sent as "500.50", never refused for its notation (review ozon).
            sent = amount.quantize(step)
        if not exact:
            how = ROUNDINGS.get(rounding)
            unit = "whole units" if self.places == 0 else f"at most {self.places} decimals"
            if how is None:
                return (
                    f"{amount}: the channel takes {unit}; never rounded silently "
                    "(set rounding to half-up or down to round it)"
                )
            sent = amount.quantize(step, rounding=how)
        if sent == 0 and not self.zero:
            said = f"{amount} rounds to 0" if not exact else "0"
            return f"{said}: the channel refuses a zero price"
        if self.most is not None and sent > self.most:
            return f"{amount} is above {text(self.most)}, the most the channel takes"
        return sent


def text(amount: Decimal) -> str:
    """The amount as a JSON string: plain notation, as many decimals as it carries."""
    return format(amount, "f")
