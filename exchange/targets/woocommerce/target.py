"""WooCommerce REST API v3 as a ``Target`` (contract 10).

How a leased batch travels: in requests of at most ``MAX_ITEMS`` (100, WooCommerce's batch limit;
413 beyond), one message per aggregate. How one request goes:

1. each payload read; a price type ``price_fields`` does not map is TERMINAL
   ``unmapped-price-type`` (never guessed), one it maps to null is left out of this shop
   (``not-for-this-shop``, cancelled); nothing is sent for either;
2. every SKU's id from ``SkuIds`` (the database); those never seen are looked up
   (``GET products?sku=a,b,…``, products and variations alike) and remembered; a SKU the shop
   lacks is TERMINAL ``unknown-sku``;
3. one ``POST products/batch`` for the products, one ``POST products/<parent>/variations/batch``
   per parent for the variations, prices as strings (Decimal text, never a float);
4. each item's result, by its position (WooCommerce answers one per item, in order, each the
   product as that item left it), classified: the item as written -> DELIVERED; an item error
   with an ``…invalid_id`` code (the id is gone) -> the id forgotten, the SKU looked up and written
   again at once (once; TEMPORARY if the id is gone again); another item error -> by its
   ``data.status`` (5xx TEMPORARY, else TERMINAL);
5. a whole answer: an HTML 404 (not the REST API: plain permalinks) sends it to
   ``?rest_route=`` once, kept; at neither address, or ``rest_no_route``: PAUSE (the shop's
   address, never a SKU); else by the table every target shares (exchange/targets/wire.py);
   a body that is not the batch JSON, or a batch answer without one result per item, UNKNOWN;
6. a request whose result is unknown (a timeout after it went out, a connection cut before the
   answer): the prices are read back (``GET products?include=<ids>``); a price the shop holds
   as sent is DELIVERED; otherwise TEMPORARY (sent again: setting a price is an absolute write).

WooCommerce has no Idempotency-Key and no versions: repeating a write is harmless, and the
queue's one message per aggregate in flight with latest-wins keeps the order (contract 10).
The consumer key and secret travel by the scheme EXCHANGE_WOO_AUTH names or ``auto`` finds
(targets/woocommerce/auth.py: Basic only over https://, OAuth 1.0a, the query form only when
asked for); they are
never logged nor put in a detail. Every request, whatever it is for, waits for the worker's pace
(``pace_with``, contract 5c). A 401 says whether the shop judged the key (its secret, its
signature, its permission to write) or saw no key by any scheme tried (the transport).
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import httpx

from exchange.domain.pause import ADDRESS_REFUSED, NO_REST_API, SETTING_MISSING
from exchange.domain.reasons import Reason
from exchange.domain.verdicts import Classification, Verdict
from exchange.errors import ReadBackFailed
from exchange.targets.base import UNPACED, HeldPrice, OutgoingMessage, Pacer
from exchange.targets.prices import read_price
from exchange.targets.shop_api.batch import chunks
from exchange.targets.wire import (
    STATUSES,
    http_client,
    httpx_failure,
    paced_request,
    transport_verdict,
)
from exchange.targets.woocommerce import auth
from exchange.targets.woocommerce.ids import SkuIds, Where

log = logging.getLogger(__name__)

ROUTE = "/wc/v3"
API = "/wp-json" + ROUTE
KEY_REFUSED = "KeyRefused"  # error_class: the shop found the key and refused it
SIGNATURE_MISMATCH = "provided signature does not match"  # check_oauth_signature's words
MAX_ITEMS = 100  # WooCommerce's batch limit (woocommerce_rest_batch_items_limit), 413 beyond
BODY_CAP = 4 * 1024 * 1024
USER_AGENT = "exchange/0.1"
ID_GONE = "IdGone"

Credentials = Callable[[], tuple[str | None, str | None]]


@dataclass(frozen=True, slots=True)
class _Price:
    message: OutgoingMessage
    sku: str
    amount: Decimal
    field: str


class _Answer(Exception):
    """A whole request's answer that decides every item of it."""

    def __init__(self, classification: Classification) -> None:
        super().__init__(classification.detail)
        self.classification = classification


def money(amount: Decimal) -> str:
    """WooCommerce's price text: plain decimal notation, never an exponent."""
    return format(amount, "f")


class WooCommerceTarget:
    name = "woocommerce"

    def __init__(
        self,
        url: str,
        credentials: Credentials,
        ids: SkuIds,
        *,
        price_fields: dict[str, str | None],
        timeout: float,
        transport: httpx.AsyncBaseTransport | None = None,
        verify: ssl.SSLContext | None = None,
        auth_setting: auth.AuthSetting = "auto",
    ) -> None:
        """``verify``: the TLS context of EXCHANGE_SITE_CA_BUNDLE (None: the default CAs);
        ``auth_setting``: EXCHANGE_WOO_AUTH."""
        self.url = url.rstrip("/")
        self._credentials = credentials
        self.ids = ids
        self.price_fields = dict(price_fields)
        self.auth_setting: auth.AuthSetting = auth_setting
        self.auth_used: auth.Scheme | None = None  # the scheme the shop last accepted
        # The REST API answers at ?rest_route= only (plain permalinks): found once, kept.
        self.rest_route = False
        self._auth = self._read_auth()
        self._http = http_client(
            base_url=self.url + API,
            timeout=timeout,
            verify=verify,
            transport=transport,
            headers={"User-Agent": USER_AGENT},
        )
        self.requests_sent = 0  # for the bench: every HTTP request, lookups and read-backs too
        self._pacer: Pacer = UNPACED

    def pace_with(self, pacer: Pacer) -> None:
        """Every request (lookups, batches, read-backs, the health check, each scheme tried)
        waits for the worker's pace (contract 5c)."""
        self._pacer = pacer

    def _read_auth(self) -> tuple[str, str] | None:
        key, secret = self._credentials()
        return (key, secret) if key and secret else None

    # -- the seam --------------------------------------------------------------------------

    def requests(self, messages: Sequence[OutgoingMessage]) -> list[list[OutgoingMessage]]:
        return chunks(messages, MAX_ITEMS)

    async def send(self, messages: Sequence[OutgoingMessage]) -> list[Classification]:
        answers: dict[str, Classification] = {}
        prices: list[_Price] = []
        for message in messages:
            judged = self._read(message)
            if isinstance(judged, Classification):
                answers[message.message_id] = judged
            else:
                prices.append(judged)
        answers.update(await self._round(prices))
        # An id the shop says is gone was forgotten: looked up and written again, once.
        gone = [p for p in prices if answers[p.message.message_id].error_class == ID_GONE]
        if gone:
            answers.update(await self._round(gone))
        return [answers[m.message_id] for m in messages]

    async def _round(self, prices: list[_Price]) -> dict[str, Classification]:
        """Look the SKUs up (those not remembered) and write their prices."""
        answers: dict[str, Classification] = {}
        try:
            where = await self._where({p.sku for p in prices})
            for p in prices:
                if p.sku not in where:
                    answers[p.message.message_id] = Classification(
                        Verdict.TERMINAL,
                        f"the shop has no product or variation with SKU {p.sku!r}",
                        http_status=200,
                        reason=Reason.UNKNOWN_SKU,
                    )
            groups: dict[int | None, list[tuple[_Price, int]]] = {}
            for p in prices:
                if p.sku in where:
                    product_id, parent = where[p.sku]
                    groups.setdefault(parent, []).append((p, product_id))
            results = await asyncio.gather(
                *(self._write_group(parent, items) for parent, items in groups.items())
            )
            for result in results:
                answers.update(result)
        except _Answer as whole:
            for p in prices:
                answers.setdefault(p.message.message_id, whole.classification)
        return answers

    async def health(self) -> Classification:
        try:
            response = await self._get("/products", params={"per_page": "1"})
        except _Answer as whole:
            return whole.classification
        return Classification(Verdict.DELIVERED, "HTTP 200", http_status=response.status_code)

    def reload_credentials(self) -> bool:
        before, self._auth = self._auth, self._read_auth()
        return self._auth != before

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- checks (exchange check) -----------------------------------------------------------

    async def can_write(self) -> Classification:
        """Whether the key may write, with no effect: an empty batch is a write request that
        changes nothing (a read-only key gets 401 ``woocommerce_rest_authentication_error``,
        WC_REST_Authentication::check_permissions)."""
        try:
            await self._post("/products/batch", {"update": []})
        except _Answer as whole:
            return whole.classification
        return Classification(Verdict.DELIVERED, "the key may write")

    # -- reading prices back (exchange verify, contract 15) ---------------------------------

    async def read_prices(self, messages: Sequence[OutgoingMessage]) -> list[HeldPrice]:
        """What the shop holds for each delivered price, read by SKU (never by a remembered
        id: a product deleted and made again is read as it is now), with the lookups of
        ``send``; the price field each message's type maps to, compared as Decimal."""
        read = [(m, self._read(m)) for m in messages]
        skus = {p.sku for _, p in read if isinstance(p, _Price)}
        try:
            listed = await self._lookup(skus)
        except _Answer as whole:
            raise ReadBackFailed(whole.classification.detail) from None
        held: list[HeldPrice] = []
        for message, p in read:
            if not isinstance(p, _Price):
                held.append(HeldPrice(message.message_id, "", "", None, None, unreadable=p.detail))
                continue
            item = listed.get(p.sku)
            held.append(
                HeldPrice(
                    message.message_id,
                    p.sku,
                    p.field,
                    p.amount,
                    _amount(item.get(p.field)) if item is not None else None,
                    found=item is not None,
                )
            )
        return held

    # -- steps -----------------------------------------------------------------------------

    def _read(self, message: OutgoingMessage) -> _Price | Classification:
        price = read_price(
            message,
            target="woocommerce",
            mapping=self.price_fields,
            setting="EXCHANGE_WOO_PRICE_FIELDS",
        )
        if isinstance(price, Classification):
            return price
        return _Price(message, price.sku, price.amount, price.mapped)

    async def _where(self, skus: set[str]) -> dict[str, Where]:
        known = await asyncio.to_thread(self.ids.get, sorted(skus))
        found: dict[str, Where] = {}
        for sku, item in (await self._lookup(skus - known.keys())).items():
            ident, parent = item.get("id"), item.get("parent_id")
            if isinstance(ident, int):
                found[sku] = (ident, parent if isinstance(parent, int) and parent else None)
        if found:
            await asyncio.to_thread(self.ids.put, found)
        return {**known, **found}

    async def _lookup(self, skus: set[str]) -> dict[str, dict[str, Any]]:
        """The shop's products and variations by SKU, as the shop lists them: ``GET
        products?sku=a,b,…`` (WC_REST_Products_Controller::prepare_objects_query: with ``sku``
        the query covers product and product_variation alike), 100 SKUs a request, the most
        ``per_page`` allows. A SKU the shop lacks (or keeps in the trash) is not in the answer."""
        found: dict[str, dict[str, Any]] = {}
        # A comma separates SKUs in the filter: a SKU holding one is looked up alone.
        plain = sorted(s for s in skus if "," not in s)
        lookups = [plain[i : i + MAX_ITEMS] for i in range(0, len(plain), MAX_ITEMS)]
        lookups += [[s] for s in sorted(skus) if "," in s]
        for group in lookups:
            response = await self._get(
                "/products", params={"sku": ",".join(group), "per_page": str(MAX_ITEMS)}
            )
            for item in _json_list(response):
                sku = item.get("sku")
                if isinstance(sku, str) and sku in group:
                    found[sku] = item
        return found

    async def _write_group(
        self, parent: int | None, items: list[tuple[_Price, int]]
    ) -> dict[str, Classification]:
        """One parent's batch, its whole answer (a 429, a 5xx) deciding its own items only: the
        other parents' batches of the round stand as their answers said (one refused batch
        used to mark every price of the round temporary, the delivered ones too, so that a
        shop at its rate limit was sent the same round again and again)."""
        try:
            return await self._write(parent, items)
        except _Answer as whole:
            return {p.message.message_id: whole.classification for p, _ in items}

    async def _write(
        self, parent: int | None, items: list[tuple[_Price, int]]
    ) -> dict[str, Classification]:
        path = "/products/batch" if parent is None else f"/products/{parent}/variations/batch"
        update = [{"id": ident, p.field: money(p.amount)} for p, ident in items]
        try:
            response = await self._post(path, {"update": update})
        except _Answer as whole:
            if not whole.classification.result_unknown:
                raise
            return await self._read_back(parent, items, whole.classification)
        body = _json(response)
        results = body.get("update") if isinstance(body, dict) else None
        if not isinstance(results, list):
            raise _Answer(_unreadable(response, "the batch answer has no update list"))
        # WooCommerce answers an update batch positionally: WC_REST_Controller::batch_items
        # (includes/rest-api/Controllers/Version3/class-wc-rest-controller.php) appends one
        # result per item of "update", in the request's order, each the product as
        # update_item left it. Two items of one id (a regular and a sale price of one SKU) are
        # two results, each read by its own position, never one result for both.
        if len(results) != len(items):
            raise _Answer(
                _unreadable(
                    response, f"the batch answer has {len(results)} results for {len(items)} items"
                )
            )
        out: dict[str, Classification] = {}
        for (p, ident), result in zip(items, results, strict=True):
            out[p.message.message_id] = await self._item(
                p, ident, result if isinstance(result, dict) else None
            )
        return out

    async def _item(self, p: _Price, ident: int, result: dict[str, Any] | None) -> Classification:
        if result is None or result.get("id") != ident:
            return Classification(
                Verdict.UNKNOWN,
                f"the batch answer's result for id {ident} is not about it",
                http_status=200,
            )
        error = result.get("error")
        if isinstance(error, dict):
            code = str(error.get("code", ""))
            data = error.get("data")
            status = data.get("status") if isinstance(data, dict) else None
            status = status if isinstance(status, int) else None
            detail = f"{code}: {str(error.get('message', ''))[:200]}"
            if code.endswith("invalid_id") or status == 404:
                await asyncio.to_thread(self.ids.forget, p.sku)
                return Classification(
                    Verdict.TEMPORARY,
                    f"id {ident} of SKU {p.sku!r} is gone ({detail}); looked up again next time",
                    http_status=status,
                    error_class=ID_GONE,
                )
            if status is not None and (status >= 500 or status == 429):
                return Classification(Verdict.TEMPORARY, detail, http_status=status)
            return Classification(Verdict.TERMINAL, detail, http_status=status or 400)
        if _amount(result.get(p.field)) != p.amount:
            return Classification(
                Verdict.UNKNOWN,
                f"the shop answered {p.field}={str(result.get(p.field))[:40]!r} for id {ident}, "
                f"not {money(p.amount)}",
                http_status=200,
            )
        if result.get("status") == "trash":
            # WooCommerce writes a trashed product by its id (update_item) and answers it: the
            # price is the shop's now, shown once the product is restored. Delivered, and said.
            return Classification(
                Verdict.DELIVERED,
                f"HTTP 200: set, but id {ident} of SKU {p.sku!r} is in the shop's trash (not shown "
                "until restored)",
                http_status=200,
                receipt=str(ident),
            )
        return Classification(Verdict.DELIVERED, "HTTP 200", http_status=200, receipt=str(ident))

    async def _read_back(
        self, parent: int | None, items: list[tuple[_Price, int]], unknown: Classification
    ) -> dict[str, Classification]:
        """After a write whose result is unknown: the price the shop holds decides. One
        ``GET …?include=<ids>`` for the request's items (at most 100, as the write)."""
        path = "/products" if parent is None else f"/products/{parent}/variations"
        ids = ",".join(str(ident) for _, ident in items)
        try:
            listed = _json_list(
                await self._get(path, params={"include": ids, "per_page": str(MAX_ITEMS)})
            )
        except _Answer:
            return {p.message.message_id: unknown for p, _ in items}
        held = {item.get("id"): item for item in listed}
        out: dict[str, Classification] = {}
        for p, ident in items:
            found = held.get(ident)
            if found is not None and _amount(found.get(p.field)) == p.amount:
                out[p.message.message_id] = Classification(
                    Verdict.DELIVERED,
                    f"read back after {unknown.error_class or 'an unknown result'}: "
                    f"{p.field}={money(p.amount)}",
                    http_status=200,
                    receipt=str(ident),
                )
            else:
                out[p.message.message_id] = Classification(
                    Verdict.TEMPORARY,
                    f"{unknown.detail}; read back: the shop does not hold it, sent again",
                    error_class=unknown.error_class,
                )
        return out

    # -- the wire --------------------------------------------------------------------------

    async def _get(self, path: str, params: dict[str, str] | None = None) -> httpx.Response:
        return await self._call("GET", path, params=params)

    async def _post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return await self._call("POST", path, body=body)

    def _url(self, method: str, path: str, params: dict[str, str] | None) -> httpx.URL:
        """The request's URL at the REST API's address: ``/wp-json/wc/v3/<path>``, or, once the
        shop showed /wp-json/ is not there, ``/?rest_route=/wc/v3/<path>`` (the address
        WordPress's ``get_rest_url`` gives with plain permalinks)."""
        if not self.rest_route:
            return self._http.build_request(method, path, params=params).url
        return httpx.URL(self.url + "/", params={"rest_route": ROUTE + path, **(params or {})})

    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
    ) -> httpx.Response:
        """One request at the REST API's address, found once: an answer that is not
        WordPress's REST API (an HTML 404: plain permalinks, no rewrite for /wp-json/) sends
        the same request to ``?rest_route=`` (nothing was applied: WordPress never ran), and
        that address is kept. Not there either: configuration (the URL, the permalinks), never
        a verdict on a SKU."""
        response = await self._signed(method, path, params, body)
        if not self.rest_route and _not_the_rest_api(response):
            self.rest_route = True
            response = await self._signed(method, path, params, body)
            if _not_the_rest_api(response):
                self.rest_route = False
                raise _Answer(self._no_rest_api(response))
            log.info(
                "WooCommerce: %s/wp-json/ is not the REST API (plain permalinks); using "
                "?rest_route= from now on",
                self.url,
            )
        elif _not_the_rest_api(response):
            raise _Answer(self._no_rest_api(response))
        return self._judged(response)

    def _no_rest_api(self, response: httpx.Response) -> Classification:
        return Classification(
            Verdict.PAUSE,
            f"HTTP {response.status_code}: WooCommerce's REST API is not at "
            f"{self.url}: {API}/ and ?rest_route={ROUTE}/ both answer a page that is "
            "not the REST API. Check EXCHANGE_WOO_URL (the shop's home address, as in WordPress "
            "→ Settings → General), that WooCommerce is active, and WordPress → Settings → "
            "Permalinks (with «Plain», /wp-json/ is not there; the service uses ?rest_route= "
            "then)",
            http_status=response.status_code,
            error_class=NO_REST_API,
        )

    async def _signed(
        self,
        method: str,
        path: str,
        params: dict[str, str] | None,
        body: dict[str, Any] | None,
    ) -> httpx.Response:
        """The request with the key by each scheme in turn until one is not refused; a 401
        after every scheme is raised as the key or the transport refused."""
        if self._auth is None:
            raise _Answer(
                Classification(
                    Verdict.PAUSE,
                    "EXCHANGE_WOO_KEY or EXCHANGE_WOO_SECRET is not set",
                    error_class=SETTING_MISSING,
                )
            )
        key, secret = self._auth
        content = json.dumps(body).encode() if body is not None else None
        base = self._url(method, path, params)
        refusals: list[tuple[auth.Scheme, str]] = []
        for scheme in auth.ordered(self.url, key, self.auth_setting):
            url, headers = auth.sign(scheme, base, method, key, secret)
            if content is not None:
                headers["Content-Type"] = "application/json"
            self.requests_sent += 1
            try:
                response = await paced_request(
                    self._http, self._pacer, method, url, content=content, headers=headers
                )
            except httpx.TransportError as exc:
                # One reading for every target (targets/wire.py): not reached, sent and no
                # answer (the shop may have applied it: read back), or a certificate not trusted.
                raise _Answer(transport_verdict(httpx_failure(exc))) from None
            if response.status_code != 401:
                self.auth_used = scheme
                auth.remember(self.url, key, scheme)
                break
            code = _error_code(response)
            refusals.append((scheme, _code(response)))
            # The shop found the key and judged it: the same key by another scheme meets the
            # same verdict. Only a signature refused for https:// may pass signed for http://.
            if code in auth.KEY_JUDGED and not (
                scheme == "oauth1" and "signature" in _code(response)
            ):
                break
        if response.status_code == 401:
            auth.forget(self.url, key)
            refused = _refused(refusals, _error_code(response))
            if any(SIGNATURE_MISMATCH in text for _, text in refusals):
                refused = await self._judge_the_address(refused)
            raise _Answer(refused)
        return response

    async def _judge_the_address(self, refused: Classification) -> Classification:
        """An OAuth 1.0a signature refused: WooCommerce signs the base string with its own
        home address (check_oauth_signature: ``get_home_url( null, $request_path, … )``), not
        the Host the request named, so a URL that reaches the shop by another name (an IP, a
        local name, another port) is refused with a right secret. The REST index says the home
        address (WP_REST_Server::get_index ``home``, no key needed): when its host, port or path
        differ from this URL's, the address is refused, not the key."""
        home = await self._home()
        if home is None or _same_address(self.url, home):
            return refused
        return Classification(
            Verdict.PAUSE,
            f"HTTP 401 Invalid signature: {self.url} is not the shop's home address ({home}). "
            "OAuth 1.0a signs the address and WooCommerce checks it against its home address, "
            f"so set EXCHANGE_WOO_URL={home} (the shop's own address); the key itself was not "
            "refused",
            http_status=401,
            error_class=ADDRESS_REFUSED,
        )

    async def _home(self) -> str | None:
        """The shop's home address from the REST index, or None when it cannot be read."""
        url = (
            httpx.URL(self.url + "/", params={"rest_route": "/", "_fields": "home"})
            if self.rest_route
            else httpx.URL(self.url + "/wp-json/", params={"_fields": "home"})
        )
        self.requests_sent += 1
        try:
            response = await paced_request(self._http, self._pacer, "GET", url)
            body = json.loads(response.content[:BODY_CAP])
        except (httpx.TransportError, ValueError):
            return None
        home = body.get("home") if isinstance(body, dict) else None
        return home.rstrip("/") if isinstance(home, str) and home.startswith("http") else None

    def _judged(self, response: httpx.Response) -> httpx.Response:
        """A 2xx answer; any other raised as the table every target shares reads it."""
        status = response.status_code
        if 200 <= status < 300:
            return response
        if status == 404 and _error_code(response) == "rest_no_route":
            # WordPress answered, but has no wc/v3 route (WooCommerce inactive, an old
            # version): about the shop, never about a SKU.
            raise _Answer(
                Classification(
                    Verdict.PAUSE,
                    f"HTTP 404 rest_no_route: WordPress at {self.url} has no WooCommerce REST API "
                    f"v3 ({ROUTE}): is WooCommerce active, and is EXCHANGE_WOO_URL the shop?",
                    http_status=404,
                    error_class=NO_REST_API,
                )
            )
        verdict = STATUSES.verdict(status)
        raise _Answer(
            Classification(
                verdict,
                f"HTTP {status}: {_code(response)}",
                http_status=status,
                retry_after=response.headers.get("Retry-After")
                if verdict is Verdict.TEMPORARY
                else None,
            )
        )


def _refused(refusals: list[tuple[auth.Scheme, str]], last_code: str) -> Classification:
    """A 401 after every scheme tried: the key refused (the shop judged it) or the transport
    (the shop saw no key: PHP does not see HTTPS, or the host drops the Authorization header)."""
    tried = "; ".join(f"{auth.describe(s)}: {text}" for s, text in refusals)
    if last_code in auth.KEY_JUDGED:
        detail = f"HTTP 401: the shop refused the key ({tried})"
    else:
        detail = (
            f"HTTP 401: the shop saw no key by any scheme tried ({tried}); the transport is "
            "refused: over http:// WooCommerce takes OAuth 1.0a only, and a host that drops the "
            "Authorization header loses Basic (EXCHANGE_WOO_AUTH=auto or oauth1 signs in the "
            "query instead, the secret never sent)"
        )
    return Classification(
        Verdict.PAUSE,
        detail,
        http_status=401,
        error_class=KEY_REFUSED if last_code in auth.KEY_JUDGED else "TransportRefused",
    )


def _same_address(url: str, home: str) -> bool:
    """Whether ``url`` names the shop as its home address does, as the signature's base string
    sees it: host, port and path (the scheme is what PHP sees, tried both ways already)."""
    try:
        a, b = httpx.URL(url), httpx.URL(home)
    except httpx.InvalidURL:
        return True
    return (a.host.lower(), a.port, a.path.rstrip("/")) == (
        b.host.lower(),
        b.port,
        b.path.rstrip("/"),
    )


def _not_the_rest_api(response: httpx.Response) -> bool:
    """A 404 that is not the REST API's answer: WordPress's REST server answers every error as
    a JSON ``WP_Error`` (``code``, ``message``), a missing route too (``rest_no_route``); an
    HTML 404 is the web server's or the theme's page for an address WordPress did not route
    to the REST API (wp-includes/rest-api.php: /wp-json/ is a rewrite rule, which plain
    permalinks do not have), about the shop's address, never about a SKU."""
    return response.status_code == 404 and not _error_code(response)


def _error_code(response: httpx.Response) -> str:
    try:
        body = json.loads(response.content[:BODY_CAP])
    except ValueError:
        return ""
    return str(body.get("code", "")) if isinstance(body, dict) else ""


def _code(response: httpx.Response) -> str:
    try:
        body = json.loads(response.content[:BODY_CAP])
    except ValueError:
        return "(not JSON)"
    if isinstance(body, dict):
        return f"{str(body.get('code', ''))[:100]} {str(body.get('message', ''))[:200]}".strip()
    return "(no code)"


def _json(response: httpx.Response) -> Any:
    try:
        return json.loads(response.content[:BODY_CAP], parse_float=Decimal)
    except ValueError:
        raise _Answer(_unreadable(response, "the answer is not JSON")) from None


def _json_list(response: httpx.Response) -> list[dict[str, Any]]:
    body = _json(response)
    if not isinstance(body, list):
        raise _Answer(_unreadable(response, "the lookup answer is not a list"))
    return [item for item in body if isinstance(item, dict)]


def _unreadable(response: httpx.Response, why: str) -> Classification:
    return Classification(
        Verdict.UNKNOWN, f"HTTP {response.status_code}: {why}", http_status=response.status_code
    )


def _amount(value: Any) -> Decimal | None:
    try:
        return Decimal(str(value)) if value not in (None, "") else None
    except InvalidOperation:
        return None
