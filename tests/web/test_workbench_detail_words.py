"""Issue 34 item 7: every intake and contract detail a Russian page shows (the quarantine's last
error, a message's history, the blocked aggregates, the site's pause) reads in Russian; the
stored text stays English (``exchange history``, ``--json``, the log). Each shape below is what
the code that records it writes (the module is named beside it)."""

from __future__ import annotations

import re

import pytest

from exchange.words import error_words

# Words that only an English sentence has (field names such as aggregate and payload stay as
# they are: what 1C's programmer looks for); ids, codes and names are left out of the shapes'
# values so that none of them can match.
ENGLISH = re.compile(
    r"\b(the|is|was|of|with|by|as|and|this|under|retry|cancel|version|taken|must|not|"
    r"different|refused|quarantined|waiting|gap|fixed|first|row|names|write|too|long|"
    r"later|belongs|carried|package|offer|wins|sent|configured|supported|unreadable)\b"
)

SHAPES = (
    # exchange/intake/staging_store.py: _conflict
    "version 1 of price 'SKU-0001/розница' was already taken as m-7 with a different payload",
    # exchange/intake/staging_store.py: an aggregate's sku and price type fixed by its first
    "aggregate 'SKU-PLAIN' is the price of sku 'SKU-1' in price type 'розница', fixed by its "
    "first version; this row names sku 'SKU-2' (not 'SKU-1') and price_type 'опт' (not "
    "'розница'). One aggregate is one price: write this price under aggregate 'SKU-2/опт' "
    "(<sku>/<price_type>)",
    "aggregate 'SKU-PLAIN' is the price of sku 'SKU-1' in price type 'розница', fixed by its "
    "first version; this row names price_type 'опт' (not 'розница'). One aggregate is one "
    "price: write this price under aggregate 'SKU-1/опт' (<sku>/<price_type>)",
    "aggregate 'SKU-PLAIN' is the price of sku 'SKU-1' in price type 'розница', fixed by its "
    "first version; this row names sku 'SKU-2' (not 'SKU-1'). One aggregate is one price: "
    "write this price under aggregate 'SKU-2/розница' (<sku>/<price_type>)",
    # exchange/intake/staging_store.py: _not_the_owner (contract 15's owner rule)
    "sku 'SKU-1' in price type 'розница' belongs to aggregate 'SKU-1/розница', the first that "
    "carried it; this row names it under aggregate 'SKU-X'. One sku in one price type is one "
    "aggregate: write this price under aggregate 'SKU-1/розница'",
    # exchange/intake/contracts.py: _check_later_offer
    "повтор в пакете: a later offer of the same 1C package maps to aggregate 'SKU-1' too, with "
    "another price; the later one in the document wins and this one is not sent (two goods "
    "sharing one Артикул, or one Ид twice)",
    # exchange/intake/contracts.py: a row's and a price payload's own rules
    "price payload: price: must be finite; currency: must be three upper-case letters, e.g. RUB",
    "price payload: sku 'A', price_type 'опт' does not belong to aggregate 'B': one aggregate "
    "is one price, named <sku>/<price_type> ('A/опт'), or the sku alone where a store has one "
    "price type",
    "name is too long: 300 characters, the contract allows at most 255 (VARCHAR(255))",
    "kind 'x' is not configured",
    "aggregate must be non-empty printable text",
    "aggregate_version must be 1 or more, not 0",
    "schema_version '2' of kind 'price' is not supported (supported: 1)",
    "unreadable staging row: payload is not valid UTF-8 text",
    "payload is not valid JSON: Expecting value: line 1 column 1 (char 0)",
    # exchange/ops/status.py: blocked
    "rejected-3981 is quarantined (http-422): retry or cancel it",
    "rejected-3981 is quarantined (http-422) after a gap at version 4",
    "waiting for version 4 (a gap); m-5 is next",
    # exchange/queue/withheld.py: left_elsewhere (a marketplace released it at another price)
    "the channel no longer withholds this version and shows buyers another price (set where "
    "the channel is managed, e.g. the seller's cabinet): it never reached buyers; superseded "
    "on the channel. Send a new price from 1C if the channel's is wrong",
    # exchange/queue/withheld.py: REPLACED_THERE (a newer upload replaced it in the quarantine)
    "the channel's price quarantine now holds another price for the good in this version's "
    "place (a newer upload replaced it there): it will never reach buyers; superseded on the "
    "channel",
    # exchange/targets/shop_api/answers.py: a 401/403
    "HTTP 401: the site refused the token",
    "HTTP 403: the site refused the token",
)


@pytest.mark.parametrize("text", SHAPES)
@pytest.mark.parametrize("wrapped", ["{}", "invalid-contract: {}", "version-conflict: {}"])
def test_each_detail_reads_in_russian_on_a_russian_page(text: str, wrapped: str) -> None:
    shown = error_words(wrapped.format(text), "ru")
    # a reason's code in brackets stays as it is (contract 15: codes stay English)
    assert not ENGLISH.search(re.sub(r"\([a-z0-9-]+\)", "", shown)), shown
    assert error_words(text, "en") == text  # English pages keep the stored text
