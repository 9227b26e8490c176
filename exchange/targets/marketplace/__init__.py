"""What the marketplace targets share (contract 14): ``ozon``, ``wildberries``,
``yandex-market``.

- ``items``: one item per SKU carrying every mapped price type's latest price, the item's
  verdict spread to every delivery it carried as new, requests grouped by SKU.
- ``money``: no silent rounding (``rounding``), the channel's currency.
- ``articles``: ``sku_source = article``: 1C's Артикул the CommerceML intake kept.
- ``holders``: one 1C SKU a marketplace good: the first SKU sent keeps it, another is
  ``invalid-for-channel`` (``wildberries``, ``yandex-market``, ``ozon``).
- ``hold``: a channel-wide wait every worker of the account keeps (Ozon's "Circle is open").

At most one item per SKU is in flight per channel: the claim takes care of it
(``exchange.queue.lease.claim``, ``one_per_sku``), so a target never sees two aggregates of one
SKU in flight at once unless they came in one batch, where ``by_sku`` puts them in one request;
and a claim that picks an aggregate of a SKU takes along every sibling of it due now, so the
price types 1C staged together go in one item (one request), never one beside the replaced
price of the other.
"""
