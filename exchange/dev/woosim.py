"""A simulator of a WooCommerce shop's REST API v3, as much of it as the woocommerce target uses
(contract 10; the notes in shared/research/commerceml-protocol.md, section on targets):

    GET  /wp-json/wc/v3/products?sku=a,b&per_page=N   products AND variations with those SKUs
    GET  /wp-json/wc/v3/products?include=1,2           products by id (variations: under
                                                       /products/<pid>/variations?include=…)
    GET  /wp-json/wc/v3/products/<id>                  one product (404 when there is none)
    GET  /wp-json/wc/v3/products/<pid>/variations/<id> one variation
    POST /wp-json/wc/v3/products/batch                 {"update": [{"id", "regular_price", ...}]}
    POST /wp-json/wc/v3/products/<pid>/variations/batch

As WooCommerce does (its source: repository woocommerce/woocommerce,
plugins/woocommerce/includes/rest-api/Controllers/Version3/): Basic auth with the consumer key
and secret (401 ``woocommerce_rest_cannot_view``; a read-only key gets 401
``woocommerce_rest_cannot_batch`` on a batch); more than 100 objects in a batch -> 413
``woocommerce_rest_request_entity_too_large`` and nothing applied
(class-wc-rest-controller.php, ``check_batch_limit``); a batch answers 200 with one result per
item of ``update``, in the request's order, each the product as ``update_item`` left it, so
two items of one id are two results (``batch_items``); an item with an unknown id gets
``{"id", "error": {"code": "woocommerce_rest_product_invalid_id", "data": {"status": 400}}}``
(class-wc-rest-crud-controller.php, ``update_item``); prices are strings; a product's id is not
its SKU.

Faults (attributes, mutable while it runs): ``poison`` SKUs (item error 500), ``reject`` SKUs
(item error 400 ``woocommerce_rest_invalid_price``), ``refuse_key`` (401 for all),
``answer_fault`` ``redirect``|``html`` (302, or a 200 HTML page), ``rate_limit`` (requests per
second above which it answers 429 with Retry-After: 1), ``half_apply`` (a batch applies its
first half, then the connection is cut: WooCommerce's batch is not a transaction), ``drop_after``
(a batch applies all, then the connection is cut), ``delay`` (seconds before each answer).

Bookkeeping: ``history(sku)`` every price the SKU's ``regular_price`` took, in order (a write of
the price it already holds changes nothing); ``requests`` counts requests by path kind.
"""

from __future__ import annotations

import base64
import collections
import json
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlsplit

from exchange.dev.httpsim import Handler, LoopbackServer

API = "/wp-json/wc/v3"
LIMIT = 100


@dataclass
class Item:
    id: int
    sku: str
    parent_id: int = 0  # 0 for a product, as WooCommerce writes it
    regular_price: str = ""
    sale_price: str = ""

    def json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "sku": self.sku,
            "type": "variation" if self.parent_id else "simple",
            "parent_id": self.parent_id,
            "regular_price": self.regular_price,
            "sale_price": self.sale_price,
            "price": self.sale_price or self.regular_price,
        }


@dataclass
class WooFaults:
    poison: set[str] = field(default_factory=set)
    reject: set[str] = field(default_factory=set)
    refuse_key: bool = False
    read_only_key: bool = False
    answer_fault: str | None = None
    rate_limit: int | None = None
    half_apply: bool = False
    drop_after: bool = False
    delay: float = 0.0


class WooSimulator(LoopbackServer):
    def __init__(self, key: str = "ck_test", secret: str = "cs_test", *, auto: bool = True) -> None:
        """``auto``: a SKU never seen becomes a product on first lookup when its name starts with
        ``VAR-`` it is a variation of product 1 (so tests and the demo need no catalogue); a
        SKU starting with ``NOSUCH`` never exists."""
        super().__init__()
        self.handler = _WooHandler
        self.key, self.secret = key, secret
        self.auto = auto
        self.faults = WooFaults()
        self.items: dict[int, Item] = {}
        self._next_id = 100
        self._history: dict[str, list[str]] = collections.defaultdict(list)
        self.requests: collections.Counter[str] = collections.Counter()
        self._window: collections.deque[float] = collections.deque()
        self._state = threading.RLock()
        self.items[1] = Item(1, "PARENT-1", 0, "")
        self._by_sku: dict[str, Item] = {"PARENT-1": self.items[1]}

    # -- catalogue -----------------------------------------------------------------------

    def add(self, sku: str, parent_id: int = 0) -> Item:
        with self._state:
            self._next_id += 1
            item = Item(self._next_id, sku, parent_id)
            self.items[item.id] = item
            self._by_sku[sku] = item
            return item

    def delete(self, sku: str) -> None:
        """The product is deleted (and perhaps made again under a new id)."""
        with self._state:
            for ident in [i.id for i in self.items.values() if i.sku == sku]:
                del self.items[ident]
            self._by_sku.pop(sku, None)

    def by_sku(self, sku: str) -> Item | None:
        with self._state:
            if sku in self._by_sku:
                return self._by_sku[sku]
            if self.auto and not sku.startswith("NOSUCH"):
                return self.add(sku, 1 if sku.startswith("VAR-") else 0)
            return None

    def history(self, sku: str) -> list[str]:
        with self._state:
            return list(self._history[sku])

    def price(self, sku: str) -> str | None:
        with self._state:
            item = self._by_sku.get(sku)
            return item.regular_price if item is not None else None

    # -- the API -------------------------------------------------------------------------

    def _authorised(self, header: str | None) -> bool:
        if self.faults.refuse_key or not header or not header.startswith("Basic "):
            return False
        try:
            given = base64.b64decode(header[6:]).decode()
        except ValueError:
            return False
        return given == f"{self.key}:{self.secret}"

    def _limited(self) -> bool:
        limit = self.faults.rate_limit
        if limit is None:
            return False
        now = time.monotonic()
        with self._state:
            while self._window and now - self._window[0] > 1.0:
                self._window.popleft()
            if len(self._window) >= limit:
                return True
            self._window.append(now)
            return False

    def _apply(self, parent: int, update: dict[str, Any]) -> dict[str, Any]:
        ident = update.get("id")
        item = self.items.get(ident) if isinstance(ident, int) else None
        if item is None or item.parent_id != parent:
            code = (
                "woocommerce_rest_product_variation_invalid_id"
                if parent
                else ("woocommerce_rest_product_invalid_id")
            )
            return {
                "id": ident,
                "error": {"code": code, "message": "Invalid ID.", "data": {"status": 400}},
            }
        if item.sku in self.faults.poison:
            return {
                "id": ident,
                "error": {"code": "internal_error", "message": "boom", "data": {"status": 500}},
            }
        if item.sku in self.faults.reject:
            return {
                "id": ident,
                "error": {
                    "code": "woocommerce_rest_invalid_price",
                    "message": "Invalid price.",
                    "data": {"status": 400},
                },
            }
        for name in ("regular_price", "sale_price"):
            if name in update:
                value = update[name]
                if not isinstance(value, str):
                    return {
                        "id": ident,
                        "error": {
                            "code": "rest_invalid_param",
                            "message": f"{name} is not of type string.",
                            "data": {"status": 400},
                        },
                    }
                if name == "regular_price" and value != item.regular_price:
                    self._history[item.sku].append(value)
                setattr(item, name, value)
        return item.json()


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


class _WooHandler(Handler):
    server_version = "Apache"

    @property
    def sim(self) -> WooSimulator:
        return self.server.sim  # type: ignore[attr-defined, no-any-return]

    def error(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        body = _json({"code": code, "message": message, "data": {"status": status}})
        self.answer(status, body, "application/json; charset=UTF-8", headers)

    def do_GET(self) -> None:
        self.handle_api("GET")

    def do_POST(self) -> None:
        self.handle_api("POST")

    def do_PUT(self) -> None:
        self.handle_api("POST")

    def handle_api(self, method: str) -> None:
        raw = self.body()
        sim = self.sim
        parts = urlsplit(self.path)
        path = parts.path.removeprefix(API).strip("/").split("/")
        sim.requests[f"{method} {'/'.join('<id>' if p.isdigit() else p for p in path)}"] += 1
        if sim.faults.delay:
            time.sleep(sim.faults.delay)
        if sim._limited():
            self.error(429, "rate_limited", "Too Many Requests", {"Retry-After": "1"})
            return
        if not sim._authorised(self.headers.get("Authorization")):
            self.error(401, "woocommerce_rest_cannot_view", "Sorry, you cannot list resources.")
            return
        if sim.faults.answer_fault == "redirect":
            self.answer(302, b"", "text/html", {"Location": "/wp-login.php"})
            return
        if sim.faults.answer_fault == "html":
            self.answer(200, b"<html><body>Maintenance</body></html>", "text/html")
            return
        with sim._state:
            query = parse_qs(parts.query)
            per_page = int(query.get("per_page", ["10"])[0])
            include = [int(i) for i in ",".join(query.get("include", [])).split(",") if i]
            listing = path == ["products"] or (
                len(path) == 3 and path[1].isdigit() and path[2] == "variations"
            )
            if method == "GET" and listing:
                if per_page > LIMIT:
                    self.error(400, "rest_invalid_param", "per_page must be at most 100")
                    return
                parent = int(path[1]) if len(path) == 3 else None
                skus = [s for s in ",".join(query.get("sku", [])).split(",") if s]
                if skus and parent is None:
                    found = [i for i in (sim.by_sku(s) for s in skus) if i is not None]
                else:
                    found = [
                        i
                        for i in sim.items.values()
                        if (parent is None and not i.parent_id) or i.parent_id == parent
                    ]
                if include:
                    found = [i for i in found if i.id in include]
                found = found[:per_page]
                self.answer(200, _json([i.json() for i in found]), "application/json")
                return
            if method == "GET" and len(path) in (2, 4) and all(p.isdigit() for p in path[1::2]):
                ident = int(path[-1])
                parent = int(path[1]) if len(path) == 4 else 0
                item = sim.items.get(ident)
                if item is None or item.parent_id != parent:
                    self.error(404, "woocommerce_rest_product_invalid_id", "Invalid ID.")
                else:
                    self.answer(200, _json(item.json()), "application/json")
                return
            batch_parent: int | None = None
            if method == "POST" and path == ["products", "batch"]:
                batch_parent = 0
            elif (
                method == "POST"
                and len(path) == 4
                and path[1].isdigit()
                and path[2:]
                == [
                    "variations",
                    "batch",
                ]
            ):
                batch_parent = int(path[1])
            if batch_parent is None:
                self.error(404, "rest_no_route", "No route was found.")
                return
            if sim.faults.read_only_key:
                self.error(401, "woocommerce_rest_cannot_batch", "Sorry, you are not allowed.")
                return
            try:
                body = json.loads(raw, parse_float=Decimal)
                updates = body.get("update", [])
                assert isinstance(updates, list)
            except (ValueError, AttributeError, AssertionError):
                self.error(400, "rest_invalid_json", "Invalid JSON body passed.")
                return
            total = sum(len(body.get(k, [])) for k in ("create", "update", "delete"))
            if total > LIMIT:
                self.error(
                    413,
                    "woocommerce_rest_request_entity_too_large",
                    f"Unable to accept more than {LIMIT} items for this request.",
                )
                return
            if sim.faults.half_apply:
                for update in updates[: len(updates) // 2 or 1]:
                    sim._apply(batch_parent, update)
                self.drop()
                return
            # WC_REST_Controller::batch_items: one result per item, in order, each the
            # product as it stood after that item (item.json() is taken then, not at the end).
            results = [sim._apply(batch_parent, u) for u in updates]
        if sim.faults.drop_after:
            self.drop()
            return
        self.answer(200, _json({"update": results}), "application/json")
