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
plugins/woocommerce/includes/rest-api/Controllers/Version3/): authentication as
``WC_REST_Authentication`` (plugins/woocommerce/includes/class-wc-rest-authentication.php) does
it, see ``_authenticate``: Basic or the key in the query only where PHP sees HTTPS (``is_ssl``),
else OAuth 1.0a one-legged with the signature verified as the shop computes it, timestamps
within 15 minutes and nonces used once; a key with Read permission only gets 401
``woocommerce_rest_authentication_error`` on a write (``check_permissions``); a request that
authenticated nobody gets the controller's 401 (``woocommerce_rest_cannot_view`` on a read,
``woocommerce_rest_cannot_batch`` on a batch); more than 100 objects in a batch -> 413
``woocommerce_rest_request_entity_too_large`` and nothing applied
(class-wc-rest-controller.php, ``check_batch_limit``); a batch answers 200 with one result per
item of ``update``, in the request's order, each the product as ``update_item`` left it, so
two items of one id are two results (``batch_items``); an item with an unknown id gets
``{"id", "error": {"code": "woocommerce_rest_product_invalid_id", "data": {"status": 400}}}``
(class-wc-rest-crud-controller.php, ``update_item``); prices are strings; a product's id is not
its SKU.

The REST index (``/wp-json/``, ``?rest_route=/``) answers the ``home`` address without a key
(WP_REST_Server::get_index). Routes as WordPress resolves them (``route``):
``/wp-json/wc/v3/…`` under the home's path (``base_path``: a WordPress in a subdirectory), or
``?rest_route=/wc/v3/…``; a route outside
``wc/v3`` is ``rest_no_route``. Plain permalinks (``pretty_permalinks=False``, a new
WordPress's default) as WordPress's source has them (WordPress/wordpress-develop
src/wp-includes/rest-api.php): ``/wp-json/`` exists only as a rewrite rule
(``rest_api_register_rewrites``: ``^wp-json/(.*)?`` -> ``index.php?rest_route=/$matches[1]``), and
with plain permalinks there are no rewrite rules (no .htaccess block), so the web server answers
its own HTML 404 for it; ``rest_route`` is a public query var (``rest_api_init``:
``$wp->add_query_var( 'rest_route' )``) that ``rest_api_loaded`` serves whatever the permalinks,
and ``get_rest_url`` gives ``<home>/?rest_route=/<path>`` when ``permalink_structure`` is
empty. The query is read as PHP's ``$_GET`` (httpsim.php_get).
The key's permissions by method as ``check_permissions``: HEAD and GET need read, POST, PUT,
PATCH and DELETE write, OPTIONS nothing (``write_only_key``: a key that may not read).

The host: ``is_ssl`` (what PHP sees; by default whether the simulator serves HTTPS; False over
HTTPS is a proxy that terminates TLS without telling PHP), ``drops_authorization`` (a CGI/FastCGI
host that does not pass the ``Authorization`` header to PHP).

Faults (attributes, mutable while it runs): ``poison`` SKUs (item error 500), ``reject`` SKUs
(item error 400 ``woocommerce_rest_invalid_price``), ``refuse_key`` (the key is revoked: the
shop knows it no more), ``read_only_key`` (the key's permissions are ``read``),
``answer_fault`` ``redirect``|``html`` (302, or a 200 HTML page), ``rate_limit`` (requests per
second above which the host's rate limiter, in front of PHP, answers 429 with Retry-After: 1
and an HTML page, as hosting limiters do; ``rate_burst`` seconds of it taken at once),
``half_apply`` (a batch applies its first half, then the connection is cut: WooCommerce's batch
is not a transaction), ``drop_after``
(a batch applies all, then the connection is cut), ``delay`` (seconds before each answer).

Bookkeeping: ``history(sku)`` every price the SKU's ``regular_price`` took, in order (a write of
the price it already holds changes nothing); ``writes()`` every ``regular_price`` an item of a
batch wrote, the same price again included, with when (``time.monotonic``), in order: what a
caller sent twice shows there; ``requests`` counts requests by path kind.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import hmac
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from exchange.dev.catalogue import Catalogue
from exchange.dev.httpsim import RATE_LIMITED_PAGE, Handler, LoopbackServer, RateLimit, php_get

API = "/wp-json/wc/v3"
LIMIT = 100
OAUTH_WINDOW = 15 * 60  # check_oauth_timestamp_and_nonce: $valid_window
OAUTH_REQUIRED = (
    "oauth_consumer_key",
    "oauth_timestamp",
    "oauth_nonce",
    "oauth_signature",
    "oauth_signature_method",
)
AUTH_ERROR = "woocommerce_rest_authentication_error"
# Apache's own 404 for a path no file and no rewrite rule serves (/wp-json/ with plain
# permalinks): the page the real stand answered.
NOT_FOUND_PAGE = (
    b'<!DOCTYPE HTML PUBLIC "-//IETF//DTD HTML 2.0//EN">\n<html><head>\n<title>404 Not Found'
    b"</title>\n</head><body>\n<h1>Not Found</h1>\n<p>The requested URL was not found on this "
    b"server.</p>\n</body></html>\n"
)


class Refused(Exception):
    """A ``WP_Error`` the authentication answers with (status 401)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class Item:
    id: int
    sku: str
    parent_id: int = 0  # 0 for a product, as WooCommerce writes it
    regular_price: str = ""
    sale_price: str = ""
    status: str = "publish"  # "trash": in the shop's trash (``trash``)

    def json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "sku": self.sku,
            "status": self.status,
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
    write_only_key: bool = False  # the key's permissions are ``write``: it may not even read
    answer_fault: str | None = None
    rate_limit: float | None = None
    rate_burst: float = 0.25  # seconds of rate_limit the host's bucket holds
    half_apply: bool = False
    drop_after: bool = False
    delay: float = 0.0


class WooSimulator(LoopbackServer):
    def __init__(
        self,
        key: str = "ck_test",
        secret: str = "cs_test",
        *,
        auto: bool = True,
        is_ssl: bool | None = None,
        drops_authorization: bool = False,
        base_path: str = "",
        pretty_permalinks: bool = True,
    ) -> None:
        """``auto``: a SKU never seen becomes a product on first lookup when its name starts with
        ``VAR-`` it is a variation of product 1 (so tests and the demo need no catalogue); a
        SKU starting with ``NOSUCH`` never exists. A rehearsal with the owner's catalogue
        (``hold``) turns it off: the shop has those SKUs and no others, and ``lacking`` lists
        every SKU asked for that it does not have (``on_lacking`` is told each the first
        time), as a real shop would answer it: not at all."""
        super().__init__()
        # A WordPress installed in a subdirectory (home ``http://host/shop``): every route is
        # under it. Plain permalinks (the default of a new WordPress): /wp-json/ is not a route
        # (WordPress's own 404 page), the REST API answers at ``/?rest_route=/wc/v3/…`` only;
        # WP::parse_request reads rest_route from the query with pretty permalinks too.
        self.base_path = base_path.rstrip("/")
        self.pretty_permalinks = pretty_permalinks
        self._is_ssl = is_ssl
        self.drops_authorization = drops_authorization
        # WordPress's ``home`` option, host[:port]: what the OAuth base string is built from,
        # whatever Host the request named (None: this simulator's own address).
        self.home: str | None = None
        self.nonces: dict[int, str] = {}  # the key's ``nonces`` column: timestamp -> nonce
        self.auth_seen: collections.Counter[str] = collections.Counter()  # who authenticated
        self.handler = _WooHandler
        self.key, self.secret = key, secret
        self.auto = auto
        self.faults = WooFaults()
        self.items: dict[int, Item] = {}
        self._next_id = 100
        self._history: dict[str, list[str]] = collections.defaultdict(list)
        self._writes: list[tuple[float, str, str]] = []  # (monotonic, sku, regular_price)
        self.requests: collections.Counter[str] = collections.Counter()
        self._limit = RateLimit()
        self._state = threading.RLock()
        self.items[1] = Item(1, "PARENT-1", 0, "")
        self._by_sku: dict[str, Item] = {"PARENT-1": self.items[1]}
        self.lacking: dict[str, None] = {}  # SKUs asked for that the shop lacks, in order
        self.on_lacking: Callable[[str], None] | None = None

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

    def trash(self, sku: str) -> None:
        """The product is moved to the trash: its id still takes writes (update_item loads it
        by id, wc_get_product, whatever its status), but a listing no longer shows it (the
        collection's ``status`` defaults to ``any``, which WP_Query reads without the trash)."""
        with self._state:
            self._by_sku[sku].status = "trash"

    def hold(self, catalogue: Catalogue) -> None:
        """The owner's catalogue: these SKUs (variations under product 1) and no others."""
        with self._state:
            self.auto = False
            for sku in catalogue.skus:
                if sku not in self._by_sku:
                    self.add(sku, 1 if sku in catalogue.variations else 0)

    def by_sku(self, sku: str) -> Item | None:
        with self._state:
            if sku in self._by_sku:
                return self._by_sku[sku]
            if self.auto and not sku.startswith("NOSUCH"):
                return self.add(sku, 1 if sku.startswith("VAR-") else 0)
            if sku not in self.lacking:
                self.lacking[sku] = None
                if self.on_lacking is not None:
                    self.on_lacking(sku)
            return None

    def history(self, sku: str) -> list[str]:
        with self._state:
            return list(self._history[sku])

    def writes(self, since: int = 0) -> list[tuple[float, str, str]]:
        """Every ``regular_price`` written by a batch's item, in order: (``time.monotonic()``,
        SKU, price), a write of the price already held included; ``since``: from that index."""
        with self._state:
            return self._writes[since:]

    def price(self, sku: str) -> str | None:
        with self._state:
            item = self._by_sku.get(sku)
            return item.regular_price if item is not None else None

    # -- the API -------------------------------------------------------------------------

    def route(self, path: str, query: str) -> str | None:
        """The REST route WordPress serves (WP::parse_request; WooCommerce's
        ``route_from_request_uri`` reads it the same way): ``rest_route`` from the query
        (plain permalinks; $_GET as PHP reads it), else, with pretty permalinks, what follows
        the home's path and ``wp-json/`` (``index.php/wp-json/`` too); None: not a REST
        request. Without slashes around it, e.g. ``wc/v3/products``."""
        rest = path.strip("/")
        home = self.base_path.strip("/")
        if home:  # outside the home's directory: not WordPress at all (the server's 404)
            if not rest.lower().startswith(home.lower()):
                return None
            rest = rest[len(home) :].strip("/")
        get = php_get(query)
        if "rest_route" in get:
            return get["rest_route"].strip("/")
        if not self.pretty_permalinks:
            return None
        rest = rest.removeprefix("index.php/")
        if rest == "wp-json":  # rest_api_register_rewrites: ^wp-json/?$ -> rest_route=/
            return ""
        return rest[len("wp-json/") :].strip("/") if rest.startswith("wp-json/") else None

    @property
    def is_ssl(self) -> bool:
        return self.ssl_context is not None if self._is_ssl is None else self._is_ssl

    def home_url(self, path: str) -> str:
        """get_home_url( null, $path, is_ssl() ? 'https' : 'http' ): the scheme is what PHP sees,
        not what the client used."""
        home = self.home or f"{self.host}:{self.port}"  # the request's path holds base_path
        return f"{'https' if self.is_ssl else 'http'}://{home}{path}"

    def _user(self, consumer_key: str) -> bool:
        """get_user_data_by_consumer_key: whether the shop holds this key."""
        return not self.faults.refuse_key and hmac.compare_digest(consumer_key, self.key)

    def _authenticate(
        self, method: str, path: str, query: str, authorization: str | None
    ) -> str | None:
        """WC_REST_Authentication::authenticate, then check_user_permissions: the scheme that
        authenticated (None: nobody, the controller's permission check answers); raises
        ``Refused`` for the WP_Error the shop answers with."""
        if self.drops_authorization:
            authorization = None  # PHP never sees it (CGI/FastCGI without a rewrite rule)
        # $_GET as PHP reads it (httpsim.php_get): the last of a repeated name wins, a dot in a
        # name is an underscore.
        get = php_get(query)
        error: Refused | None = None
        scheme: str | None = None
        if self.is_ssl:
            try:
                scheme = self._basic(get, authorization)
            except Refused as refused:
                error = refused
        if scheme is None:
            try:
                scheme = self._oauth(method, path, get, authorization)
            except Refused as refused:
                error = refused
        if error is not None:  # check_authentication_error (set_error also forgot the user)
            raise error
        if scheme is not None:
            self._check_permissions(method)
            self.auth_seen[scheme] += 1
        return scheme

    def _basic(self, get: dict[str, str], authorization: str | None) -> str | None:
        """perform_basic_authentication: $_GET consumer_key/consumer_secret first, else
        PHP_AUTH_USER/PHP_AUTH_PW; an unknown key is no error (OAuth may follow), a wrong
        secret is."""
        key, secret, scheme = get.get("consumer_key", ""), get.get("consumer_secret", ""), "query"
        if not (key and secret):
            key, secret, scheme = "", "", "basic"
            if authorization and authorization[:6].lower() == "basic ":
                try:
                    key, _, secret = base64.b64decode(authorization[6:]).decode().partition(":")
                except ValueError:
                    key = secret = ""
        if not (key and secret) or not self._user(key):
            return None
        if not hmac.compare_digest(self.secret, secret):
            raise Refused(AUTH_ERROR, "Consumer secret is invalid.")
        return scheme

    def _oauth(
        self, method: str, path: str, get: dict[str, str], authorization: str | None
    ) -> str | None:
        """perform_oauth_authentication with get_oauth_parameters: $_GET (and $_POST, empty
        for a JSON body) and an ``Authorization: OAuth`` header's parameters."""
        params = dict(get)
        if authorization and authorization.startswith("OAuth "):
            for name, quoted, plain in _OAUTH_HEADER.findall(authorization):
                params[name] = unquote(quoted or plain)
        missing = [name for name in OAUTH_REQUIRED if not params.get(name)]
        if len(missing) == len(OAUTH_REQUIRED):
            return None  # not even trying OAuth
        if missing:
            raise Refused(
                "woocommerce_rest_authentication_missing_parameter",
                f"Missing OAuth parameter{'s' if len(missing) > 1 else ''} {', '.join(missing)}",
            )
        if not self._user(params["oauth_consumer_key"]):
            raise Refused(AUTH_ERROR, "Consumer key is invalid.")
        self._check_oauth_signature(method, path, params)
        self._check_timestamp_and_nonce(params["oauth_timestamp"], params["oauth_nonce"])
        return "oauth1"

    def _check_oauth_signature(self, method: str, path: str, params: dict[str, str]) -> None:
        """check_oauth_signature: the base string from the home URL with the scheme PHP sees,
        every parameter but the signature sorted by name (strcmp), normalize_parameters and
        join_with_equals_sign (each ``key=value`` encoded again, joined by ``%26``)."""
        base_uri = _rawurlencode(self.home_url(path))
        consumer_signature = unquote(params.pop("oauth_signature").replace(" ", "+"))
        ordered = sorted(params.items(), key=lambda kv: kv[0].encode())
        pairs = [_rawurlencode(f"{_rawurlencode(k)}={_rawurlencode(v)}") for k, v in ordered]
        string_to_sign = f"{method.upper()}&{base_uri}&{'%26'.join(pairs)}"
        method_name = params["oauth_signature_method"]
        if method_name not in ("HMAC-SHA1", "HMAC-SHA256"):
            raise Refused(AUTH_ERROR, "Invalid signature - signature method is invalid.")
        digest = hashlib.sha1 if method_name == "HMAC-SHA1" else hashlib.sha256
        signature = base64.b64encode(
            hmac.new(f"{self.secret}&".encode(), string_to_sign.encode(), digest).digest()
        ).decode()
        if not hmac.compare_digest(signature, consumer_signature):
            raise Refused(AUTH_ERROR, "Invalid signature - provided signature does not match.")

    def _check_timestamp_and_nonce(self, timestamp: str, nonce: str) -> None:
        """check_oauth_timestamp_and_nonce: within 15 minutes of now; a nonce not used in them
        (kept per timestamp, as the shop's ``nonces`` column keeps them)."""
        now = time.time()
        try:
            stamp = int(timestamp)
        except ValueError:
            stamp = 0
        if stamp < now - OAUTH_WINDOW or stamp > now + OAUTH_WINDOW:
            raise Refused(AUTH_ERROR, "Invalid timestamp.")
        with self._state:
            if nonce in self.nonces.values():
                raise Refused(AUTH_ERROR, "Invalid nonce - nonce has already been used.")
            self.nonces[stamp] = nonce
            for old in [t for t in self.nonces if t < now - OAUTH_WINDOW]:
                del self.nonces[old]

    def _check_permissions(self, method: str) -> None:
        """check_permissions: the key's permissions (``read``, ``write`` or ``read_write``) by
        the request's method: HEAD and GET need read, POST, PUT, PATCH and DELETE write,
        OPTIONS nothing, any other method is refused."""
        permissions = (
            "read"
            if self.faults.read_only_key
            else "write"
            if self.faults.write_only_key
            else "read_write"
        )
        if method in ("HEAD", "GET"):
            if permissions not in ("read", "read_write"):
                raise Refused(AUTH_ERROR, "The API key provided does not have read permissions.")
        elif method in ("POST", "PUT", "PATCH", "DELETE"):
            if permissions not in ("write", "read_write"):
                raise Refused(AUTH_ERROR, "The API key provided does not have write permissions.")
        elif method != "OPTIONS":
            raise Refused(AUTH_ERROR, "Unknown request method.")

    def _limited(self) -> bool:
        return self._limit.refuses(self.faults.rate_limit, self.faults.rate_burst)

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
                if name == "regular_price":
                    with self._state:
                        self._writes.append((time.monotonic(), item.sku, value))
                        if value != item.regular_price:
                            self._history[item.sku].append(value)
                setattr(item, name, value)
        return item.json()


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def _rawurlencode(text: str) -> str:
    """PHP's rawurlencode (and wc_rest_urlencode_rfc3986): RFC 3986, only A-Z a-z 0-9 - _ . ~
    left as they are."""
    return quote(text, safe="-_.~")


# parse_header's pattern: oauth_name="quoted" or oauth_name=plain
_OAUTH_HEADER = re.compile(r'(oauth_[a-z_-]*)=(?:"([^"]*)"|([^,]*))')


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

    def do_HEAD(self) -> None:
        self.handle_api("HEAD")

    def do_OPTIONS(self) -> None:
        self.handle_api("OPTIONS")

    def do_PATCH(self) -> None:
        self.handle_api("PATCH")

    def do_DELETE(self) -> None:
        self.handle_api("DELETE")

    def answer(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        """A HEAD answer is the GET answer's status and headers, without the body."""
        if self.command == "HEAD":
            with self.sim.lock:
                self.sim.statuses[status] += 1
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            return
        super().answer(status, body, content_type, headers)

    def handle_api(self, method: str) -> None:
        raw = self.body()
        sim = self.sim
        parts = urlsplit(self.path)
        route = sim.route(parts.path, parts.query)
        if route is None:  # not a REST request: the web server's (or the theme's) 404 page
            self.answer(404, NOT_FOUND_PAGE, "text/html; charset=iso-8859-1")
            return
        if route == "" and method in ("GET", "HEAD"):
            # The REST index (WP_REST_Server::get_index, wp-includes/rest-api/
            # class-wp-rest-server.php): the site's name, ``url``, ``home`` (home_url(), its
            # scheme what PHP sees) and namespaces; no key needed (WooCommerce authenticates
            # only routes of its namespaces, is_request_to_rest_api).
            home = sim.home_url(sim.base_path)
            index = {"name": "Shop", "url": home, "home": home, "namespaces": ["wp/v2", "wc/v3"]}
            self.answer(200, _json(index), "application/json")
            return
        if not route.startswith("wc/v3/"):
            self.error(
                404, "rest_no_route", "No route was found matching the URL and request method."
            )
            return
        path = route.removeprefix("wc/v3/").strip("/").split("/")
        sim.requests[f"{method} {'/'.join('<id>' if p.isdigit() else p for p in path)}"] += 1
        if sim.faults.delay:
            time.sleep(sim.faults.delay)
        if sim._limited():
            # The host's limiter answers before PHP runs: its own HTML page, not WooCommerce's.
            self.answer(429, RATE_LIMITED_PAGE, "text/html", {"Retry-After": "1"})
            return
        try:
            who = sim._authenticate(
                method, parts.path, parts.query, self.headers.get("Authorization")
            )
        except Refused as refused:
            self.error(401, refused.code, refused.message)
            return
        if who is None:
            # The controller's permission check for a visitor (rest_authorization_required_code:
            # 401 while nobody is logged in), class-wc-rest-products-v2-controller.php
            # get_items_permissions_check / batch_items_permissions_check.
            if method == "POST":
                self.error(
                    401,
                    "woocommerce_rest_cannot_batch",
                    "Sorry, you are not allowed to batch manipulate this resource.",
                )
            else:
                self.error(401, "woocommerce_rest_cannot_view", "Sorry, you cannot list resources.")
            return
        if sim.faults.answer_fault == "redirect":
            self.answer(302, b"", "text/html", {"Location": "/wp-login.php"})
            return
        if sim.faults.answer_fault == "html":
            self.answer(200, b"<html><body>Maintenance</body></html>", "text/html")
            return
        if method == "OPTIONS":  # WP_REST_Server: the route's description, no handler runs
            self.answer(
                200, _json({"namespace": "wc/v3", "methods": ["GET", "POST"]}), "application/json"
            )
            return
        with sim._state:
            query = php_get(parts.query)
            per_page = int(query.get("per_page", "10"))
            include = [int(i) for i in query.get("include", "").split(",") if i]
            listing = path == ["products"] or (
                len(path) == 3 and path[1].isdigit() and path[2] == "variations"
            )
            if method in ("GET", "HEAD") and listing:
                if per_page > LIMIT:
                    self.error(400, "rest_invalid_param", "per_page must be at most 100")
                    return
                parent = int(path[1]) if len(path) == 3 else None
                skus = [s for s in query.get("sku", "").split(",") if s]
                if skus and parent is None:
                    found = [i for i in (sim.by_sku(s) for s in skus) if i is not None]
                    found = [i for i in found if i.status != "trash"]
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
            if (
                method in ("GET", "HEAD")
                and len(path) in (2, 4)
                and all(p.isdigit() for p in path[1::2])
            ):
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


def main(argv: list[str] | None = None) -> None:
    """``python -m exchange.dev.woosim --port N``: a WooCommerce shop in the foreground, for
    ``exchange check`` and ``exchange run`` (every SKU exists but ``NOSUCH-*``; ``VAR-*`` are
    variations). The key and secret: EXCHANGE_WOO_KEY/_SECRET when set, else demo values.

    ``--catalogue FILE`` (the shop owner's rehearsal, contract 15): the shop holds the SKUs of
    that file (a list, or WooCommerce's product CSV export) and no others; each SKU the
    service asks for that the shop lacks is printed as it comes, and all of them at the end."""
    from exchange.dev.catalogue import CatalogueError, read_catalogue
    from exchange.dev.httpsim import arguments, credential, run_in_foreground, setting_line

    parser = arguments(
        "python -m exchange.dev.woosim", "Serve a simulated WooCommerce shop until Ctrl-C."
    )
    parser.add_argument(
        "--catalogue",
        metavar="FILE",
        help="the shop's SKUs: one a line, or WooCommerce's product CSV export",
    )
    args = parser.parse_args(argv)
    key, key_set = credential("EXCHANGE_WOO_KEY", "ck_demo_key")
    secret, secret_set = credential("EXCHANGE_WOO_SECRET", "cs_demo_secret")
    sim = WooSimulator(key, secret)
    if args.catalogue:
        try:
            catalogue = read_catalogue(Path(args.catalogue))
        except CatalogueError as exc:
            parser.exit(2, f"error: {exc}\n")
        sim.hold(catalogue)
        print(f"the shop holds the {len(catalogue.skus)} SKUs of {args.catalogue}", flush=True)
        sim.on_lacking = lambda sku: print(f"the shop lacks SKU {sku!r}", flush=True)
    sim.host, sim.port = args.host, args.port
    run_in_foreground(
        sim,
        "WooCommerce",
        lambda s: [
            setting_line("EXCHANGE_TARGET", "woocommerce"),
            setting_line("EXCHANGE_WOO_URL", s.url),
            setting_line("EXCHANGE_WOO_KEY", key, key_set),
            setting_line("EXCHANGE_WOO_SECRET", secret, secret_set),
            setting_line("EXCHANGE_WOO_PRICE_FIELDS", '{"retail": "regular_price"}'),
        ],
    )
    if args.catalogue:
        lacking = list(sim.lacking)
        print(f"SKUs sent that the shop lacks: {len(lacking)}", flush=True)
        for sku in lacking:
            print(f"  {sku}", flush=True)


if __name__ == "__main__":
    main()
