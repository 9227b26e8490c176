"""``exchange check``: is this installation ready to run? One small function per check.

Each check returns a ``CheckResult``; none raises for an expected failure, so that one broken
piece (a database down) never hides the state of the others (the site, the report directory).
Checks that depend on an earlier one (the database must answer before its tables can be
inspected) are skipped with the reason instead of failing twice for one cause.

Nothing here writes to the databases or sends anything with an effect to the site: the site
check is ``GET /api/v1/health``, which the contract (5) declares harmless. The notification
ways (e-mail, Telegram) are reached and signed in to, never sent a message.
"""

from __future__ import annotations

import asyncio
import os
import re
import ssl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

import httpx
from sqlalchemy import Engine, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from exchange.db.engine import make_engine, ping, transaction
from exchange.db.migrate import ensure_current, staging_differences
from exchange.db.schema import aggregates, staging
from exchange.domain.verdicts import Classification, Verdict
from exchange.errors import ExchangeError
from exchange.i18n import N_, Lang, _, matching
from exchange.intake import sources
from exchange.ops.notify_by import messengers
from exchange.secrets import safe_http_url, safe_url
from exchange.settings import Settings, onec_folder
from exchange.settings.channels import channel_words
from exchange.targets.bitrix.target import BitrixTarget
from exchange.targets.ozon.answers import KEY_PAUSES
from exchange.targets.ozon.target import OzonTarget, Roles
from exchange.targets.shop_api.client import TLS_ERROR, Response, SiteClient, SiteResult
from exchange.targets.wildberries import token as wb_token
from exchange.targets.wildberries.budget import Budget
from exchange.targets.wildberries.store import MemoryWbStore
from exchange.targets.wildberries.target import WildberriesTarget
from exchange.targets.wire import tls_words
from exchange.targets.woocommerce import auth
from exchange.targets.woocommerce.ids import MemorySkuIds
from exchange.targets.woocommerce.target import KEY_REFUSED, WooCommerceTarget
from exchange.words import error_words

STAGING_TABLE = "staging_intents"

# A database behind a firewall that drops packets would otherwise hang the check for minutes.
PG_CONNECT_TIMEOUT_S = 10


class Status(StrEnum):
    OK = "OK"
    FAIL = "FAIL"
    SKIP = "SKIP"


@dataclass(frozen=True, slots=True)
class CheckResult:
    status: Status
    what: str
    detail: str = ""
    # The channel of EXCHANGE_CHANNELS a target's check is about (contract 13); None without.
    channel: str | None = None

    @property
    def passed(self) -> bool:
        return self.status is Status.OK

    def line(self, lang: Lang = "en") -> str:
        # "OK   " is padded to the width of "FAIL " so that the names line up in a terminal.
        # OK/FAIL/SKIP are codes (scripts look for them): English in every language.
        what = what_words(self.what, lang)
        if self.channel is not None:
            what = _("channel {name}: {what}", lang).format(name=self.channel, what=what)
        label = f"{self.status.value:<4} {what}"
        detail = detail_words(self.detail, lang)
        return f"{label}: {detail}" if detail else label


# What each check is called (``CheckResult.what``), as a Russian ``check`` says it; the values
# it names (addresses, names) as they are.
_WHAT = tuple(
    (re.compile(pattern), words)
    for pattern, words in (
        (r"configuration valid", N_("configuration valid")),
        (r"database reachable \((?P<url>.*)\)", N_("database reachable ({url})")),
        (
            r"staging database reachable \((?P<url>.*)\)",
            N_("staging database reachable ({url})"),
        ),
        (
            r"database migrated to the latest revision",
            N_("database migrated to the latest revision"),
        ),
        (
            r"staging database migrated to the latest revision",
            N_("staging database migrated to the latest revision"),
        ),
        (r"staging table (?P<table>\S+)", N_("staging table {table}")),
        (
            r"site reachable and token accepted \((?P<url>.*)\)",
            N_("site reachable and token accepted ({url})"),
        ),
        (
            r"RabbitMQ target: the exchange (?P<name>.*) exists",
            N_("RabbitMQ target: the exchange {name} exists"),
        ),
        (r"(?P<name>\S+) source", N_("{name} source")),
        (r"WooCommerce key may read \((?P<url>.*)\)", N_("WooCommerce key may read ({url})")),
        (
            r"WooCommerce key may write \(an empty products/batch\)",
            N_("WooCommerce key may write (an empty products/batch)"),
        ),
        (
            r"1C-Bitrix exchange: checkauth and init \((?P<url>.*)\)",
            N_("1C-Bitrix exchange: checkauth and init ({url})"),
        ),
        (
            r"Ozon key accepted \((?P<url>.*)\)",
            N_("Ozon key accepted ({url})"),
        ),
        (
            r"Ozon key may set prices \(/v1/product/import/prices\)",
            N_("Ozon key may set prices (/v1/product/import/prices)"),
        ),
        (
            r"Ozon: a sample of SKUs resolves to offer_ids",
            N_("Ozon: a sample of SKUs resolves to offer_ids"),
        ),
        (r"Ozon limits", N_("Ozon limits")),
        (
            r"Yandex Market key accepted \(business (?P<business>\d+) at (?P<url>.*)\)",
            N_("Yandex Market key accepted (business {business} at {url})"),
        ),
        (
            r"Yandex Market: a sample of SKUs resolves to offers",
            N_("Yandex Market: a sample of SKUs resolves to offers"),
        ),
        (r"Yandex Market: the limits", N_("Yandex Market: the limits")),
        (
            r"Yandex Market: price fields the channel does not send",
            N_("Yandex Market: price fields the channel does not send"),
        ),
        (
            r"Yandex Market: the key's right to change prices",
            N_("Yandex Market: the key's right to change prices"),
        ),
        # (they were in the details' table, so a Russian check said them in English)
        (
            r"Wildberries token's rights \(its claims\)",
            N_("Wildberries token's rights (its claims)"),
        ),
        (
            r"Wildberries accepts the token \((?P<url>.*)\)",
            N_("Wildberries accepts the token ({url})"),
        ),
        (
            r"Wildberries: vendor codes resolve to nmIDs",
            N_("Wildberries: vendor codes resolve to nmIDs"),
        ),
        (r"report directory writable \((?P<path>.*)\)", N_("report directory writable ({path})")),
        (r"report directory writable", N_("report directory writable")),
        (r"site reachable and token accepted", N_("site reachable and token accepted")),
        (r"notifications by (?P<way>\S+)", N_("notifications by {way}")),
        (r"serve listens on (?P<address>\S+)", N_("serve listens on {address}")),
        (r"1C exchange \(/1c_exchange\.php\)", N_("1C exchange (/1c_exchange.php)")),
        (r"1C exchange folder \((?P<path>.*)\)", N_("1C exchange folder ({path})")),
        (r"JSON intake \(/api/v1/intents\)", N_("JSON intake (/api/v1/intents)")),
    )
)
WB_LIMITS = N_(
    "the Prices and discounts category allows 10 requests per 6 s with a burst of 5, shared by "
    "uploads, task polls and catalogue reads (the service keeps under it, polls never taking "
    "more than half)"
)
# research §2.3: a Base token's bucket for the whole category is 4 requests an hour, burst 1.
WB_BASE_LIMITS = N_(
    "a Base token: the Prices and discounts category allows it 4 requests an hour with a burst "
    "of 1, shared by uploads, task polls and catalogue reads"
)
WB_BASE_SKIPPED = N_(
    "not read: a Base token allows 4 requests an hour with a burst of 1, and the one this "
    "check may spend went to the read above (make a Personal or Service token)"
)
# Yandex Market's price fields the channel does not send (``_ym_unmapped``): the sentence, and
# each field's part of it (said apart: a pattern's group is never translated in turn).
YM_UNMAPPED = re.compile(
    r"warning: (?P<fields>.*): the cabinet holds them and ym_price_types maps no price type to "
    r"them, so the channel's first update of each offer erases them \(Yandex drops a field an "
    r"update leaves out\); map a 1C price type to them to keep them",
    re.DOTALL,
)
YM_UNMAPPED_WORDS = N_(
    "warning: {fields}: the cabinet holds them and ym_price_types maps no price type to them, so "
    "the channel's first update of each offer erases them (Yandex drops a field an update leaves "
    "out); map a 1C price type to them to keep them"
)
_YM_FIELD = (
    (
        re.compile(r"(?P<field>\S+) on (?P<n>\d+) of (?P<m>\d+) sampled offers \((?P<offers>.*)\)"),
        N_("{field} on {n} of {m} sampled offers ({offers})"),
    ),
)
# The details said most often, the same way; any other detail (what a database or a site
# answered) as it is.
_DETAILS = tuple(
    (re.compile(pattern), words)
    for pattern, words in (
        (r"unreachable", N_("unreachable")),
        (r"a read of prices answered", N_("a read of prices answered")),
        (
            r"not verified: Yandex Market has no way to ask without changing a price \(a "
            r"read-only key is refused only when it writes\); the first delivery tells, and a "
            r"refusal pauses delivery",
            N_(
                "not verified: Yandex Market has no way to ask without changing a price (a "
                "read-only key is refused only when it writes); the first delivery tells, and a "
                "refusal pauses delivery"
            ),
        ),
        (r"delivery is paused: (?P<note>.*)", N_("delivery is paused: {note}")),
        (r"its database is unreachable", N_("its database is unreachable")),
        (r"missing: run `exchange migrate`", N_("missing: run `exchange migrate`")),
        (r"open", N_("way in open")),  # (not the breaker's "open")
        (
            r"file (?P<file>.+); kinds (?P<kinds>.*); retry delay (?P<delays>\S+) s, "
            r"(?P<attempts>\d+) attempts; poll every (?P<poll>\S+) s",
            N_(
                "file {file}; kinds {kinds}; retry delay {delays} s, {attempts} attempts; poll "
                "every {poll} s"
            ),
        ),
        (
            r"environment and defaults; kinds (?P<kinds>.*); retry delay (?P<delays>\S+) s, "
            r"(?P<attempts>\d+) attempts; poll every (?P<poll>\S+) s",
            N_(
                "environment and defaults; kinds {kinds}; retry delay {delays} s, {attempts} "
                "attempts; poll every {poll} s"
            ),
        ),
        (
            r"the file (?P<path>.+) does not exist: run `exchange migrate` first",
            N_("the file {path} does not exist: run `exchange migrate` first"),
        ),
        (
            r"(?P<name>EXCHANGE_\w+) is not set \(exchange run requires it\)",
            N_("{name} is not set (exchange run requires it)"),
        ),
        (
            r"(?P<name>EXCHANGE_\w+) is not set \(no scheduled report\)",
            N_("{name} is not set (no scheduled report)"),
        ),
        (r"closed: (?P<name>EXCHANGE_\w+) is not set", N_("closed: {name} is not set")),
        (
            r"(?P<count>\d+) columns with the contract's types and lengths",
            N_("{count} columns with the contract's types and lengths"),
        ),
        (r"open; price types sent: (?P<types>.*)", N_("open; price types sent: {types}")),
        (
            r"at most 1000 items a request and 50 requests a second per Client-Id; 10 price "
            r"updates of one product an hour: the 11th waits until the oldest of the ten is an "
            r"hour old, a product Ozon refused for it goes again an hour later",
            N_(
                "at most 1000 items a request and 50 requests a second per Client-Id; 10 price "
                "updates of one product an hour: the 11th waits until the oldest of the ten is "
                "an hour old, a product Ozon refused for it goes again an hour later"
            ),
        ),
        (r"(?P<found>\d+) of (?P<all>\d+) found", N_("{found} of {all} found")),
        # the site (what it answered, after the colon, as it is)
        (
            r"token refused \(HTTP (?P<status>\d+)\): no token is set \(EXCHANGE_SITE_TOKEN or "
            r"EXCHANGE_SITE_TOKEN_FILE\)",
            N_(
                "token refused (HTTP {status}): no token is set (EXCHANGE_SITE_TOKEN or "
                "EXCHANGE_SITE_TOKEN_FILE)"
            ),
        ),
        (
            r"token refused \(HTTP (?P<status>\d+)\): renew EXCHANGE_SITE_TOKEN or "
            r"EXCHANGE_SITE_TOKEN_FILE",
            N_(
                "token refused (HTTP {status}): renew EXCHANGE_SITE_TOKEN or "
                "EXCHANGE_SITE_TOKEN_FILE"
            ),
        ),
        (
            r"HTTP (?P<status>\d+): redirects are not followed, check EXCHANGE_SITE_URL "
            r"\(https:// instead of http://, the right host\)",
            N_(
                "HTTP {status}: redirects are not followed, check EXCHANGE_SITE_URL (https:// "
                "instead of http://, the right host)"
            ),
        ),
        (
            r"site answered HTTP (?P<status>\d+) to GET /api/v1/health",
            N_("site answered HTTP {status} to GET /api/v1/health"),
        ),
        (
            r"site unreachable: (?P<error>[\w.]+): (?P<answer>.*)",
            N_("site unreachable: {error}: {answer}"),
        ),
        (
            r"TLS: the address speaks plain HTTP, not TLS \((?P<answer>.*)\): the URL says "
            r"https:// but that port serves http://; use the shop's HTTPS port, or http:// where "
            r"the service allows it \(this machine only\)\. Not a certificate problem",
            N_(
                "TLS: the address speaks plain HTTP, not TLS ({answer}): the URL says https:// but "
                "that port serves http://; use the shop's HTTPS port, or http:// where the "
                "service allows it (this machine only). Not a certificate problem"
            ),
        ),
        (
            r"TLS: the site's certificate is not trusted \((?P<answer>.*)\); if a company CA "
            r"signed it, set EXCHANGE_SITE_CA_BUNDLE to that CA's PEM file",
            N_(
                "TLS: the site's certificate is not trusted ({answer}); if a company CA signed "
                "it, set EXCHANGE_SITE_CA_BUNDLE to that CA's PEM file"
            ),
        ),
        # the staging table (migrate.staging_differences, each part said on its own)
        (r"cannot be inspected: (?P<answer>.*)", N_("cannot be inspected: {answer}")),
        (r"column (?P<name>\S+) is missing", N_("column {name} is missing")),
        (
            r"column (?P<name>\S+) has no DEFAULT \(1C may leave it out\)",
            N_("column {name} has no DEFAULT (1C may leave it out)"),
        ),
        (
            r"column (?P<name>\S+) is (?P<have>.+), the contract says (?P<want>.+)",
            N_("column {name} is {have}, the contract says {want}"),
        ),
        (
            r"the primary key is \((?P<have>.*)\), the contract says \(id\)",
            N_("the primary key is ({have}), the contract says (id)"),
        ),
        (
            r"column id is not generated by the database \(GENERATED ALWAYS AS IDENTITY\)",
            N_("column id is not generated by the database (GENERATED ALWAYS AS IDENTITY)"),
        ),
        (
            r"extra column (?P<name>\S+) is NOT NULL without a DEFAULT \(1C's inserts would "
            r"fail\)",
            N_("extra column {name} is NOT NULL without a DEFAULT (1C's inserts would fail)"),
        ),
        # sources and targets
        (
            r"the brokers extra is not installed: (?P<module>\S+) is missing",
            N_("the brokers extra is not installed: {module} is missing"),
        ),
        (r"no key", N_("no key")),
        (r"not configured", N_("not configured")),
        (r"the key cannot read", N_("the key cannot read")),
        (
            r"(?P<answer>.+): give the key Read/Write permissions",
            N_("{answer}: give the key Read/Write permissions"),
        ),
        (
            r"(?P<answer>.+): the shop could not take a write just now \(busy, in maintenance or "
            r"failing\); not a matter of the key's permissions: run the check again later, and "
            r"ask the shop's host if it persists",
            N_(
                "{answer}: the shop could not take a write just now (busy, in maintenance or "
                "failing); not a matter of the key's permissions: run the check again later, and "
                "ask the shop's host if it persists"
            ),
        ),
        (
            r"EXCHANGE_WOO_URL, EXCHANGE_WOO_KEY and EXCHANGE_WOO_SECRET are required",
            N_("EXCHANGE_WOO_URL, EXCHANGE_WOO_KEY and EXCHANGE_WOO_SECRET are required"),
        ),
        (
            r"EXCHANGE_BITRIX_URL, _USER and _PASSWORD are required",
            N_("EXCHANGE_BITRIX_URL, _USER and _PASSWORD are required"),
        ),
        (
            r"EXCHANGE_BITRIX_CATALOG_ID is required \(the catalogue's Ид\)",
            N_("EXCHANGE_BITRIX_CATALOG_ID is required (the catalogue's Ид)"),
        ),
        # a folder (the report's, the 1C exchange's)
        (r"exists and is not a directory", N_("exists and is not a directory")),
        (
            r"cannot write a file in (?P<path>.+): (?P<why>[^:]+)",
            N_("cannot write a file in {path}: {why}"),
        ),
        (
            r"does not exist yet; run creates it in (?P<path>.+)",
            N_("does not exist yet; run creates it in {path}"),
        ),
        # serve
        (
            r"serve stages into the service's database; EXCHANGE_STAGING_URL names another one "
            r"\(not supported by serve yet\)",
            N_(
                "serve stages into the service's database; EXCHANGE_STAGING_URL names another "
                "one (not supported by serve yet)"
            ),
        ),
        (
            r"the certificate or key cannot be used: (?P<answer>.+)",
            N_("the certificate or key cannot be used: {answer}"),
        ),
        (r"behind a TLS proxy", N_("behind a TLS proxy")),
        (r"loopback, plain HTTP", N_("loopback, plain HTTP")),
        (
            r"EXCHANGE_HTTP_TLS_CERT and EXCHANGE_HTTP_TLS_KEY must be set together",
            N_("EXCHANGE_HTTP_TLS_CERT and EXCHANGE_HTTP_TLS_KEY must be set together"),
        ),
        (
            r"(?P<setting>EXCHANGE_HTTP_HOST=\S+) is not loopback: plain HTTP would carry the 1C "
            r"password and the intake token unencrypted; set EXCHANGE_HTTP_TLS_CERT and "
            r"EXCHANGE_HTTP_TLS_KEY, or EXCHANGE_HTTP_BEHIND_PROXY=true when a proxy terminates "
            r"TLS",
            N_(
                "{setting} is not loopback: plain HTTP would carry the 1C password and the intake "
                "token unencrypted; set EXCHANGE_HTTP_TLS_CERT and EXCHANGE_HTTP_TLS_KEY, or "
                "EXCHANGE_HTTP_BEHIND_PROXY=true when a proxy terminates TLS"
            ),
        ),
        (
            r"closed: EXCHANGE_1C_USER and EXCHANGE_1C_PASSWORD are not both set",
            N_("closed: EXCHANGE_1C_USER and EXCHANGE_1C_PASSWORD are not both set"),
        ),
        (
            r"EXCHANGE_1C_PRICE_TYPES is empty: every price would be refused",
            N_("EXCHANGE_1C_PRICE_TYPES is empty: every price would be refused"),
        ),
        # marketplaces (contract 14): the key's rights, the sample, what is missing
        (
            r"Client-Id (?P<id>\S+), roles (?P<roles>[^;]+)",
            N_("Client-Id {id}, roles {roles}"),
        ),
        (r"it expires (?P<at>.+)", N_("it expires {at}")),
        (
            r"the key's roles lack (?P<m>\S+): give the key a role that may set prices \(Seller "
            r"account: Settings → Seller API\)",
            N_(
                "the key's roles lack {m}: give the key a role that may set prices (Seller "
                "account: Settings → Seller API)"
            ),
        ),
        (r"the key's roles lack (?P<m>\S+)", N_("the key's roles lack {m}")),
        (r"(?P<n>\d+) of (?P<m>\d+) SKUs are offers", N_("{n} of {m} SKUs are offers")),
        (
            r"not in the cabinet: (?P<listed>.+) \(their prices end unknown-sku\)",
            N_("not in the cabinet: {listed} (their prices end unknown-sku)"),
        ),
        (
            r"none of (?P<m>\d+) SKUs is an offer of the cabinet \((?P<listed>.+)\): is the "
            r"offerId there 1C's SKU, or its article \(sku_source\)\?",
            N_(
                "none of {m} SKUs is an offer of the cabinet ({listed}): is the offerId there "
                "1C's SKU, or its article (sku_source)?"
            ),
        ),
        (
            r"ozon_client_id and ozon_api_key_file are required",
            N_("ozon_client_id and ozon_api_key_file are required"),
        ),
        (
            r"EXCHANGE_YM_BUSINESS_ID and EXCHANGE_YM_API_KEY_FILE are required",
            N_("EXCHANGE_YM_BUSINESS_ID and EXCHANGE_YM_API_KEY_FILE are required"),
        ),
        (
            r"EXCHANGE_WB_TOKEN_FILE is not set or empty",
            N_("EXCHANGE_WB_TOKEN_FILE is not set or empty"),
        ),
        (r"no key", N_("no key")),
        (r"no token", N_("no token")),
        (r"refused", N_("refused")),
        (r"not configured", N_("not configured")),
        (r"the key is refused", N_("the key is refused")),
        (
            r"ozon_api_url is not Ozon's API \(check it\)",
            N_("ozon_api_url is not Ozon's API (check it)"),
        ),
        (r"the key could not be checked", N_("the key could not be checked")),
        (r"the key is not accepted", N_("the key is not accepted")),
        (r"no price taken yet", N_("no price taken yet")),
        (r"no price has been taken in yet", N_("no price has been taken in yet")),
        (
            r"the database cannot say which SKUs the service took",
            N_("the database cannot say which SKUs the service took"),
        ),
        (
            r"a (?P<kind>\w+) token, «Цены и скидки», read and write, expires no expiry",
            N_("a {kind} token, «Цены и скидки», read and write, with no expiry"),
        ),
        (
            r"a (?P<kind>\w+) token, «Цены и скидки», read and write, expires (?P<at>.+)",
            N_("a {kind} token, «Цены и скидки», read and write, expires {at}"),
        ),
        (
            r"a Test token \(the sandbox only\), «Цены и скидки», read and write, expires "
            r"(?P<at>.+)",
            N_("a Test token (the sandbox only), «Цены и скидки», read and write, expires {at}"),
        ),
        (
            r"the (?P<kind>\w+) token expired on (?P<at>.+): make a new one",
            N_("the {kind} token expired on {at}: make a new one"),
        ),
        (
            r"the (?P<kind>\w+) token has no «Цены и скидки» \(Prices and discounts\) category",
            N_("the {kind} token has no «Цены и скидки» (Prices and discounts) category"),
        ),
        (
            r"the (?P<kind>\w+) token is read-only: prices cannot be written with it",
            N_("the {kind} token is read-only: prices cannot be written with it"),
        ),
        # Wildberries' limits, its Base token and its catalogue (mpminor 9)
        (re.escape(WB_LIMITS), WB_LIMITS),
        (re.escape(WB_BASE_LIMITS), WB_BASE_LIMITS),
        (re.escape(WB_BASE_SKIPPED), WB_BASE_SKIPPED),
        (
            r"a Base token: 4 requests an hour for the whole Prices category, too few for "
            r"prices; make a Personal or Service token",
            N_(
                "a Base token: 4 requests an hour for the whole Prices category, too few for "
                "prices; make a Personal or Service token"
            ),
        ),
        (
            r"the catalogue lists (?P<n>\d+) vendor codes; no price has been taken in yet to "
            r"compare",
            N_("the catalogue lists {n} vendor codes; no price has been taken in yet to compare"),
        ),
        (
            r"the catalogue lists (?P<n>\d+) vendor codes; of (?P<m>\d+) of the service's SKUs, "
            r"(?P<found>\d+) found, not found: (?P<missing>.*) \(unknown-sku unless sku_source "
            r"says otherwise\)",
            N_(
                "the catalogue lists {n} vendor codes; of {m} of the service's SKUs, {found} "
                "found, not found: {missing} (unknown-sku unless sku_source says otherwise)"
            ),
        ),
        (
            r"the catalogue lists (?P<n>\d+) vendor codes; of (?P<m>\d+) of the service's SKUs, "
            r"(?P<found>\d+) found",
            N_("the catalogue lists {n} vendor codes; of {m} of the service's SKUs, {found} found"),
        ),
        # Yandex Market's limits and the fields it does not send
        (
            r"at most (?P<offers>\d+) offers a minute \(ym_offers_per_minute\) and "
            r"(?P<parallel>\d+) requests at once \(ym_parallel\), 500 offers a request; an "
            r"accepted price is read back and must show within (?P<timeout>\S+) s "
            r"\(ym_apply_timeout\)",
            N_(
                "at most {offers} offers a minute (ym_offers_per_minute) and {parallel} requests "
                "at once (ym_parallel), 500 offers a request; an accepted price is read back and "
                "must show within {timeout} s (ym_apply_timeout)"
            ),
        ),
        # Ozon's sample
        (r"(?P<n>\d+) of (?P<m>\d+) found", N_("{n} of {m} found")),
        (
            r"the account's prices are in (?P<other>\S+), this channel's currency is "
            r"(?P<ours>\S+): set currency = \"(?P<code>\S+)\" for it \(Ozon refuses a price in "
            r"another currency than the account's\)",
            N_(
                "the account's prices are in {other}, this channel's currency is {ours}: set "
                'currency = "{code}" for it (Ozon refuses a price in another currency than the '
                "account's)"
            ),
        ),
        (
            r"(?P<n>\d+) of (?P<m>\d+) not in the seller's account: (?P<skus>[^;]*)",
            N_("{n} of {m} not in the seller's account: {skus}"),
        ),
        (
            r"(?P<n>\d+) of (?P<m>\d+) without an article: (?P<skus>[^;]*)",
            N_("{n} of {m} without an article: {skus}"),
        ),
        (
            r"a Test token works on WB's sandbox only \(https://(?P<host>\S+)\), not at "
            r"(?P<url>\S+): make a Personal or Service token",
            N_(
                "a Test token works on WB's sandbox only (https://{host}), not at {url}: make a "
                "Personal or Service token"
            ),
        ),
        (
            r"the token is not a JWT whose claims can be read: Wildberries judges it",
            N_("the token is not a JWT whose claims can be read: Wildberries judges it"),
        ),
        # notifications
        (
            r"bot @(?P<bot>\S+) writes to chat (?P<chat>.+)",
            N_("bot @{bot} writes to chat {chat}"),
        ),
        (
            r"(?P<server>\S+ \(\w+\)), signed in as (?P<user>.+?); to (?P<recipients>.+)",
            N_("{server}, signed in as {user}; to {recipients}"),
        ),
        (r"(?P<server>\S+ \(\w+\)); to (?P<recipients>.+)", N_("{server}; to {recipients}")),
    )
)


def detail_words(detail: str, lang: Lang) -> str:
    """A check's detail in ``lang``: the service's words in the catalog (this table, then the
    errors the service raises: ``words.error_words``), each part of a list ("; ") on its own;
    what a site, a database or a system answered, quoted in it, as it was received."""
    if lang == "en" or not detail:
        return detail
    unmapped = YM_UNMAPPED.fullmatch(detail)
    if unmapped is not None:
        fields = "; ".join(
            matching(part, _YM_FIELD, lang) for part in unmapped["fields"].split("; ")
        )
        return _(YM_UNMAPPED_WORDS, lang).format(fields=fields)
    said = matching(detail, _DETAILS, lang)
    if said != detail:
        return said
    said = error_words(detail, lang)
    if said != detail:
        return said
    parts = detail.split("; ")
    if len(parts) > 1:
        return "; ".join(detail_words(part, lang) for part in parts)
    return detail


def what_words(what: str, lang: Lang) -> str:
    """A check's name in ``lang``; one this table does not know, as it is."""
    return matching(what, _WHAT, lang)


def ok(what: str, detail: str = "") -> CheckResult:
    return CheckResult(Status.OK, what, detail)


def fail(what: str, detail: str) -> CheckResult:
    return CheckResult(Status.FAIL, what, detail)


def skip(what: str, detail: str) -> CheckResult:
    return CheckResult(Status.SKIP, what, detail)


# -- configuration ---------------------------------------------------------------------------


def check_configuration(settings: Settings, source: Path | None = None) -> CheckResult:
    """The settings loaded (the model validated kinds, policies, delays and the financial rule);
    show what an operator most needs to confirm."""
    kinds = ", ".join(f"{kind}={policy.value}" for kind, policy in sorted(settings.kinds.items()))
    where = f"file {source}" if source else "environment and defaults"
    return ok(
        "configuration valid",
        f"{where}; kinds {kinds}; retry delay {settings.retry_base_delay:g}-"
        f"{settings.retry_max_delay:g} s, {settings.max_attempts} attempts; "
        f"poll every {settings.poll_interval:g} s",
    )


# -- databases --------------------------------------------------------------------------------


def engine_for(url: str) -> Engine:
    if make_url(url).get_backend_name() == "postgresql":
        return make_engine(url, connect_args={"connect_timeout": PG_CONNECT_TIMEOUT_S})
    return make_engine(url)


def _missing_sqlite_file(url: str) -> Path | None:
    """SQLite creates a missing file on connect: the check must not leave an empty database
    behind (and report it "reachable") where the operator mistyped a path."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    path = Path(parsed.database)
    return None if path.exists() else path


def check_reachable(engine: Engine, label: str = "database") -> CheckResult:
    url = safe_url(engine.url.render_as_string(hide_password=False))
    what = f"{label} reachable ({url})"
    missing = _missing_sqlite_file(engine.url.render_as_string(hide_password=False))
    if missing is not None:
        return fail(what, f"the file {missing} does not exist: run `exchange migrate` first")
    try:
        ping(engine)
    except ExchangeError as exc:
        return fail(what, str(exc))
    return ok(what)


def check_migrated(engine: Engine, label: str = "database") -> CheckResult:
    what = f"{label} migrated to the latest revision"
    try:
        ensure_current(engine)
    except ExchangeError as exc:
        return fail(what, str(exc))
    return ok(what)


def check_staging_table(engine: Engine) -> CheckResult:
    """Contract 1's columns: names, types and lengths, NULL/NOT NULL, the defaults 1C relies
    on. 1C writes to this table from its own side, so a column a DBA widened (TEXT for
    VARCHAR(200)) or made nullable breaks the exchange silently; each difference is named."""
    what = f"staging table {STAGING_TABLE}"
    try:
        with transaction(engine, read_only=True) as connection:
            problems = staging_differences(connection)
    except (ExchangeError, SQLAlchemyError) as exc:
        return fail(what, f"cannot be inspected: {exc}")
    if problems is None:
        return fail(what, "missing: run `exchange migrate`")
    if problems:
        return fail(what, "; ".join(problems))
    return ok(what, f"{len(staging.columns)} columns with the contract's types and lengths")


# -- the site ---------------------------------------------------------------------------------

SITE_WHAT = "site reachable and token accepted"


def check_site(
    settings: Settings, transport: httpx.AsyncBaseTransport | None = None
) -> CheckResult:
    """``GET /api/v1/health`` with the token. A missing site URL fails: ``run`` needs one."""
    if not settings.site_url:
        return fail(SITE_WHAT, "EXCHANGE_SITE_URL is not set (exchange run requires it)")
    what = f"{SITE_WHAT} ({settings.site_url})"
    try:
        token = settings.token()
        settings.site_tls()
    except ExchangeError as exc:  # an unreadable EXCHANGE_SITE_TOKEN_FILE or CA bundle
        return fail(what, str(exc))
    result = asyncio.run(_health(settings, token, transport))
    if not isinstance(result, Response) and result.error_class == TLS_ERROR:
        return fail(what, tls_words(result.detail))
    if not isinstance(result, Response):
        return fail(what, f"site unreachable: {result.error_class}: {result.detail}")
    if 200 <= result.status < 300:
        return ok(what, f"HTTP {result.status}")
    if result.status in (401, 403):
        hint = (
            "no token is set (EXCHANGE_SITE_TOKEN or EXCHANGE_SITE_TOKEN_FILE)"
            if not token
            else "renew EXCHANGE_SITE_TOKEN or EXCHANGE_SITE_TOKEN_FILE"
        )
        return fail(what, f"token refused (HTTP {result.status}): {hint}")
    if 300 <= result.status < 400:
        return fail(
            what,
            f"HTTP {result.status}: redirects are not followed, check EXCHANGE_SITE_URL "
            "(https:// instead of http://, the right host)",
        )
    return fail(what, f"site answered HTTP {result.status} to GET /api/v1/health")


async def _health(
    settings: Settings, token: str | None, transport: httpx.AsyncBaseTransport | None
) -> SiteResult:
    assert settings.site_url is not None
    client = SiteClient(
        settings.site_url,
        token,
        timeout=settings.http_timeout,
        concurrency=1,
        transport=transport,
        verify=settings.site_tls(),
    )
    try:
        return await client.health()
    finally:
        await client.aclose()


# -- the other targets (contract 10) ---------------------------------------------------------


def check_target(
    settings: Settings, transport: httpx.AsyncBaseTransport | None = None
) -> list[CheckResult]:
    """The chosen target: ``api`` as above; ``woocommerce``: the key may read (a product list)
    and write (an empty batch, which changes nothing); ``bitrix``: checkauth and init (init
    empties the site's upload folder: not while 1C's own exchange to it runs); ``rabbitmq``:
    the broker, the credentials and the exchange; ``yandex-market``: the key, a sample of SKUs
    and the limits."""
    if settings.target == "woocommerce":
        return asyncio.run(_check_woocommerce(settings, transport))
    if settings.target == "bitrix":
        return [asyncio.run(_check_bitrix(settings, transport))]
    if settings.target == "rabbitmq":
        return [asyncio.run(_check_rabbitmq_target(settings))]
    if settings.target == "wildberries":
        return asyncio.run(_check_wildberries(settings, transport))
    if settings.target == "ozon":
        return asyncio.run(_check_ozon(settings, transport))
    if settings.target == "yandex-market":
        return asyncio.run(_check_yandex_market(settings, transport))
    return [check_site(settings, transport)]


WB_SAMPLE = 5  # the service's SKUs a check looks for in WB's catalogue


async def _check_wildberries(
    settings: Settings, transport: httpx.AsyncBaseTransport | None
) -> list[CheckResult]:
    """Contract 14: the token's rights read from its own claims (the Prices category, not
    read-only, not expired; the limits its kind has), WB accepts it (a read of one good), and
    a sample of the service's SKUs resolves to nmIDs in the catalogue. Nothing is uploaded."""
    rights_what = "Wildberries token's rights (its claims)"
    accepted_what = f"Wildberries accepts the token ({safe_http_url(settings.wb_api_url)})"
    sample_what = "Wildberries: vendor codes resolve to nmIDs"
    try:
        token = settings.secret("wb_token")
    except ExchangeError as exc:
        return [
            fail(rights_what, str(exc)),
            skip(accepted_what, "no token"),
            skip(sample_what, "no token"),
        ]
    if not token:
        reason = "EXCHANGE_WB_TOKEN_FILE is not set or empty"
        return [
            fail(rights_what, reason),
            skip(accepted_what, "no token"),
            skip(sample_what, "no token"),
        ]
    results = [_wb_rights(token, settings.wb_api_url)]
    said = wb_token.claims(token)
    base = said is not None and said.kind == "Base"
    target = WildberriesTarget(
        settings.wb_api_url,
        lambda: token,
        MemoryWbStore(),
        timeout=settings.http_timeout,
        transport=transport,
        # The token's own bucket (research §2.3): a Base token's is 4 an hour, burst 1.
        budget=Budget(requests=4, period=3600.0, burst=1) if base else None,
    )
    try:
        health = await target.health()
        if health.verdict is not Verdict.DELIVERED:
            return [*results, fail(accepted_what, health.detail), skip(sample_what, "refused")]
        results.append(ok(accepted_what, WB_BASE_LIMITS if base else WB_LIMITS))
        if base:  # its burst is spent: another request now is a 429 (never waited out here)
            return [*results, skip(sample_what, WB_BASE_SKIPPED)]
        try:
            catalogue = await target.catalogue()
        except Exception as exc:  # the target's whole answer (a 429, a page not JSON)
            return [*results, fail(sample_what, str(exc))]
    finally:
        await target.aclose()
    sample = _sample_skus(settings)
    found = [sku for sku in sample if sku in catalogue]
    missing = [sku for sku in sample if sku not in catalogue]
    detail = f"the catalogue lists {len(catalogue)} vendor codes"
    if not sample:
        return [*results, ok(sample_what, f"{detail}; no price has been taken in yet to compare")]
    detail += f"; of {len(sample)} of the service's SKUs, {len(found)} found"
    if missing:
        detail += (
            f", not found: {', '.join(missing)} (unknown-sku unless sku_source says otherwise)"
        )
        return [*results, fail(sample_what, detail)]
    return [*results, ok(sample_what, detail)]


YM_RIGHTS = "Yandex Market: the key's right to change prices"
# research §3.2: the scopes are the key's access groups in the cabinet; no method reads them,
# and a pricing:read-only key is accepted by reads and refused (403) only by a price change.
YM_RIGHTS_UNKNOWN = (
    "not verified: Yandex Market has no way to ask without changing a price (a read-only key "
    "is refused only when it writes); the first delivery tells, and a refusal pauses delivery"
)


def _ym_rights(settings: Settings) -> CheckResult:
    """A key's right to write, as far as the service can tell without writing: a current pause
    of this channel's workers for a read-only key fails; else said not verified (SKIP)."""
    from exchange.domain.pause import PauseCause
    from exchange.ops.status import holding, pause_of, worker_rows

    channel = settings.channel_name()
    if _missing_sqlite_file(settings.database_url) is not None:  # never created by a check
        return skip(YM_RIGHTS, YM_RIGHTS_UNKNOWN)
    try:
        engine = engine_for(settings.database_url)
    except Exception:
        return skip(YM_RIGHTS, YM_RIGHTS_UNKNOWN)
    try:
        with transaction(engine, read_only=True) as connection:
            from datetime import UTC, datetime

            rows = [
                w for w in worker_rows(connection, datetime.now(UTC)) if w.get("channel") == channel
            ]
            pause = pause_of(None, holding(rows))
    except (SQLAlchemyError, ExchangeError):
        return skip(YM_RIGHTS, YM_RIGHTS_UNKNOWN)
    finally:
        engine.dispose()
    if pause is not None and pause.get("cause") == PauseCause.YM_READ_ONLY_KEY.value:
        return fail(YM_RIGHTS, f"delivery is paused: {pause['note']}")
    return skip(YM_RIGHTS, YM_RIGHTS_UNKNOWN)


# research §2.7: a Test token (acc 2) works on this host alone
WB_SANDBOX_HOST = "discounts-prices-api-sandbox.wildberries.ru"


def _wb_rights(token: str, url: str) -> CheckResult:
    what = "Wildberries token's rights (its claims)"
    said = wb_token.claims(token)
    if said is None:
        return skip(what, "the token is not a JWT whose claims can be read: Wildberries judges it")
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    expires = said.expires.date().isoformat() if said.expires else "no expiry"
    if said.expired(now):
        return fail(what, f"the {said.kind} token expired on {expires}: make a new one")
    if not said.prices:
        return fail(
            what, f"the {said.kind} token has no «Цены и скидки» (Prices and discounts) category"
        )
    if said.read_only:
        return fail(what, f"the {said.kind} token is read-only: prices cannot be written with it")
    if said.kind == "Base":
        return fail(
            what,
            "a Base token: 4 requests an hour for the whole Prices category, too few for prices; "
            "make a Personal or Service token",
        )
    if said.kind == "Test" and httpx.URL(url).host != WB_SANDBOX_HOST:
        # rev32p: OK here, then the next line failed: WB refuses a Test token elsewhere
        return fail(
            what,
            f"a Test token works on WB's sandbox only (https://{WB_SANDBOX_HOST}), not at "
            f"{safe_http_url(url)}: make a Personal or Service token",
        )
    if said.kind == "Test":
        return ok(
            what,
            f"a Test token (the sandbox only), «Цены и скидки», read and write, expires {expires}",
        )
    return ok(what, f"a {said.kind} token, «Цены и скидки», read and write, expires {expires}")


def _sample_skus(settings: Settings) -> list[str]:
    """A few SKUs the service has taken prices for (the newest), or none when the database
    cannot say."""
    try:
        engine = engine_for(settings.database_url)
    except Exception:
        return []
    try:
        with transaction(engine, read_only=True) as connection:
            rows = connection.execute(
                select(aggregates.c.sku)
                .where(aggregates.c.kind == "price", aggregates.c.sku.is_not(None))
                .order_by(aggregates.c.id.desc())
                .limit(WB_SAMPLE)
            ).scalars()
            skus = sorted({str(sku) for sku in rows})
        if settings.sku_source == "article":  # the vendor code is 1C's article (contract 14)
            from exchange.db.articles import DbArticles

            found = DbArticles(engine).of(skus)
            return [found.get(sku, f"{sku} (no article)") for sku in skus]
        return skus
    except (SQLAlchemyError, ExchangeError):
        return []
    finally:
        engine.dispose()


async def _check_rabbitmq_target(settings: Settings) -> CheckResult:
    """The broker answers, takes the credentials, and the exchange exists (a passive declare:
    nothing is published)."""
    what = f"RabbitMQ target: the exchange {settings.rabbitmq_exchange!r} exists"
    try:
        from exchange.targets.rabbitmq.target import RabbitMqTarget
    except ImportError as exc:
        return fail(what, f"the brokers extra is not installed: {exc.name} is missing")
    target = RabbitMqTarget(
        lambda: settings.rabbitmq_url or "",
        settings.rabbitmq_exchange or "",
        timeout=settings.http_timeout,
    )
    try:
        health = await target.health()
    finally:
        await target.aclose()
    if health.verdict is Verdict.DELIVERED:
        return ok(what, health.detail)
    return fail(what, health.detail)


# -- a broker source (contract 12) ------------------------------------------------------------


def check_source(settings: Settings, engine: Engine) -> list[CheckResult]:
    """The broker ``exchange run`` also takes intents from: it answers, takes the credentials,
    and has the queue (RabbitMQ) or the stream (Redis; its group is created at start). Nothing
    is consumed. None when no source is configured."""
    if settings.source is None:
        return []
    what = f"{settings.source} source"
    try:
        source = sources.build(settings, engine, None)
    except ExchangeError as exc:  # the brokers extra missing
        return [fail(what, str(exc))]
    assert source is not None

    async def reach() -> str:
        try:
            return await source.check()
        finally:
            await source.aclose()

    try:
        return [ok(what, asyncio.run(reach()))]
    except ExchangeError as exc:
        return [fail(what, str(exc))]


async def _check_woocommerce(
    settings: Settings, transport: httpx.AsyncBaseTransport | None
) -> list[CheckResult]:
    read_what = f"WooCommerce key may read ({safe_http_url(settings.woo_url or '')})"
    write_what = "WooCommerce key may write (an empty products/batch)"
    try:
        key, secret = settings.secret("woo_key"), settings.secret("woo_secret")
        verify = settings.site_tls()
    except ExchangeError as exc:  # an unreadable secret file or CA bundle
        return [fail(read_what, str(exc)), skip(write_what, "no key")]
    if not settings.woo_url or not key or not secret:
        reason = "EXCHANGE_WOO_URL, EXCHANGE_WOO_KEY and EXCHANGE_WOO_SECRET are required"
        return [fail(read_what, reason), skip(write_what, "not configured")]
    target = WooCommerceTarget(
        settings.woo_url,
        lambda: (key, secret),
        MemorySkuIds(),
        price_fields=dict(settings.woo_price_fields),
        timeout=settings.http_timeout,
        transport=transport,
        verify=verify,
        auth_setting=settings.woo_auth,
    )
    try:
        read = await target.health()
        if read.verdict is not Verdict.DELIVERED:
            return [fail(read_what, read.detail), skip(write_what, "the key cannot read")]
        write = await target.can_write()
    finally:
        await target.aclose()
    written = (
        ok(write_what)
        if write.verdict is Verdict.DELIVERED
        else fail(write_what, _why_not_written(write))
    )
    # Which scheme carried the key (EXCHANGE_WOO_AUTH): what `auto` found, or what was set.
    how = f"{read.detail}; authentication: {auth.describe(target.auth_used or 'oauth1')}"
    if target.rest_route:  # plain permalinks: /wp-json/ is not there
        how += "; the REST API at ?rest_route= (WordPress's permalinks are «Plain»)"
    return [ok(read_what, how), written]


YM_SAMPLE = 20  # SKUs of the latest prices looked up at Yandex Market


def price_skus(settings: Settings, limit: int = YM_SAMPLE) -> list[str]:
    """The SKUs of the latest price messages the service holds (a sample for a marketplace's
    check), newest first; none when the database cannot be read (its own check says why)."""
    import json

    from sqlalchemy import select

    from exchange.db.schema import messages

    engine = engine_for(settings.database_url)
    try:
        with transaction(engine, read_only=True) as connection:
            rows = connection.execute(
                select(messages.c.payload)
                .where(messages.c.kind == "price")
                .order_by(messages.c.id.desc())
                .limit(limit * 10)
            ).all()
    except (SQLAlchemyError, ExchangeError, OSError):
        return []
    finally:
        engine.dispose()
    skus: list[str] = []
    for (payload,) in rows:
        try:
            sku = str(json.loads(payload)["sku"])
        except (ValueError, KeyError, TypeError):
            continue
        if sku not in skus:
            skus.append(sku)
    return skus[:limit]


async def _check_yandex_market(
    settings: Settings, transport: httpx.AsyncBaseTransport | None
) -> list[CheckResult]:
    """Contract 14: the key accepted (a read of one offer's price, no effect), a sample of the
    latest SKUs found among the cabinet's offers, and the limits in words. Write rights are
    confirmed by the first delivery: Yandex has no read-only way to ask for them."""
    from exchange.db.articles import DbArticles
    from exchange.targets.marketplace.articles import NO_ARTICLES
    from exchange.targets.yandex_market.target import YandexMarketTarget

    url = settings.ym_api_url
    key_what = f"Yandex Market key accepted (business {settings.ym_business_id} at {url})"
    sample_what = "Yandex Market: a sample of SKUs resolves to offers"
    limits_what = "Yandex Market: the limits"
    try:
        key = settings.secret("ym_api_key")
        verify = settings.site_tls()
    except ExchangeError as exc:  # an unreadable key file or CA bundle
        return [fail(key_what, str(exc)), skip(sample_what, "no key")]
    if settings.ym_business_id is None or not key:
        reason = "EXCHANGE_YM_BUSINESS_ID and EXCHANGE_YM_API_KEY_FILE are required"
        return [fail(key_what, reason), skip(sample_what, "not configured")]
    articles_engine = (
        engine_for(settings.database_url) if settings.sku_source == "article" else None
    )
    target = YandexMarketTarget(
        url,
        settings.ym_business_id,
        lambda: key,
        price_types=dict(settings.ym_price_types),
        sku_source=settings.sku_source,
        articles=DbArticles(articles_engine) if articles_engine is not None else NO_ARTICLES,
        offers_per_minute=settings.ym_offers_per_minute,
        parallel=settings.ym_parallel,
        apply_timeout=settings.ym_apply_timeout,
        timeout=settings.http_timeout,
        transport=transport,
        verify=verify,
    )
    sample = await asyncio.to_thread(price_skus, settings)
    try:
        health = await target.health()
        if health.verdict is not Verdict.DELIVERED:
            return [fail(key_what, health.detail), skip(sample_what, "the key is not accepted")]
        shown = await target.offers_shown(sample) if sample else None
    finally:
        await target.aclose()
        if articles_engine is not None:
            articles_engine.dispose()
    rights = await asyncio.to_thread(_ym_rights, settings)
    results = [ok(key_what, "a read of prices answered"), rights]
    found = set(shown) if isinstance(shown, dict) else shown
    if found is None:
        results.append(skip(sample_what, "no price has been taken in yet"))
    elif isinstance(found, Classification):
        results.append(fail(sample_what, found.detail))
    else:
        missing = [sku for sku in sample if sku not in found]
        listed = ", ".join(repr(sku) for sku in missing[:5]) + (" …" if len(missing) > 5 else "")
        if not missing:
            results.append(ok(sample_what, f"{len(sample)} of {len(sample)} SKUs are offers"))
        elif len(missing) < len(sample):
            results.append(
                ok(
                    sample_what,
                    f"{len(sample) - len(missing)} of {len(sample)} SKUs are offers; not in the "
                    f"cabinet: {listed} (their prices end unknown-sku)",
                )
            )
        else:
            results.append(
                fail(
                    sample_what,
                    f"none of {len(sample)} SKUs is an offer of the cabinet ({listed}): is the "
                    "offerId there 1C's SKU, or its article (sku_source)?",
                )
            )
    unmapped = _ym_unmapped(settings, shown) if isinstance(shown, dict) else None
    if unmapped is not None:
        results.append(unmapped)
    results.append(
        ok(
            limits_what,
            f"at most {settings.ym_offers_per_minute} offers a minute "
            f"(ym_offers_per_minute) and {settings.ym_parallel} requests at once "
            f"(ym_parallel), 500 offers a request; an accepted price is read back and must "
            f"show within {settings.ym_apply_timeout:g} s (ym_apply_timeout)",
        )
    )
    return results


def _ym_unmapped(settings: Settings, shown: dict[str, frozenset[str]]) -> CheckResult | None:
    """The price fields the sampled offers carry in the cabinet that ``ym_price_types`` maps
    no price type to: Yandex erases them with the channel's first update of the offer
    (research §3.6.2, an update without ``discountBase`` or ``minimumForBestseller`` drops
    it). A warning on an OK line (the seller may mean it); None when there is none."""
    what = "Yandex Market: price fields the channel does not send"
    mapped = {field for field in settings.ym_price_types.values() if field} | {"value"}
    carried: dict[str, list[str]] = {}
    for sku in sorted(shown):
        for name in sorted(shown[sku] - mapped):
            carried.setdefault(name, []).append(sku)
    if not carried:
        return None
    said = "; ".join(
        f"{name} on {len(skus)} of {len(shown)} sampled offers ("
        + ", ".join(repr(s) for s in skus[:3])
        + (" …" if len(skus) > 3 else "")
        + ")"
        for name, skus in carried.items()
    )
    return ok(
        what,
        f"warning: {said}: the cabinet holds them and ym_price_types maps no price type to them, "
        "so the channel's first update of each offer erases them (Yandex drops a field an "
        "update leaves out); map a 1C price type to them to keep them",
    )


def _why_not_written(write: Classification) -> str:
    """The empty write's failure as the shop owner must act on it: only the shop's judgement
    of the key (WC_REST_Authentication::check_permissions, a 401 after the key was found) is a
    matter of permissions; a busy or failing shop (503, 5xx, a timeout) is not."""
    if write.error_class == KEY_REFUSED:
        return f"{write.detail}: give the key Read/Write permissions"
    if write.verdict is Verdict.TEMPORARY:
        return (
            f"{write.detail}: the shop could not take a write just now (busy, in maintenance or "
            "failing); not a matter of the key's permissions: run the check again later, and "
            "ask the shop's host if it persists"
        )
    return write.detail


async def _check_bitrix(
    settings: Settings, transport: httpx.AsyncBaseTransport | None
) -> CheckResult:
    # wc1c's receiver address carries its lazysign, a key: never shown.
    what = f"1C-Bitrix exchange: checkauth and init ({safe_http_url(settings.bitrix_url or '')})"
    try:
        password = settings.secret("bitrix_password")
        verify = settings.site_tls()
    except ExchangeError as exc:  # an unreadable secret file or CA bundle
        return fail(what, str(exc))
    if not (settings.bitrix_url and settings.bitrix_user and password):
        return fail(what, "EXCHANGE_BITRIX_URL, _USER and _PASSWORD are required")
    if not settings.bitrix_catalog_id:
        return fail(what, "EXCHANGE_BITRIX_CATALOG_ID is required (the catalogue's Ид)")
    target = BitrixTarget(
        settings.bitrix_url,
        settings.bitrix_user,
        lambda: password,
        catalog_id=settings.bitrix_catalog_id,
        price_types=dict(settings.bitrix_price_types),
        max_import_steps=settings.bitrix_max_import_steps,
        timeout=settings.http_timeout,
        transport=transport,
        verify=verify,
    )
    try:
        verdict, init = await target.check()
    finally:
        await target.aclose()
    if verdict.verdict is Verdict.DELIVERED:
        return ok(what, init)
    return fail(what, verdict.detail)


# -- Ozon (contract 14) -----------------------------------------------------------------------

OZON_SAMPLE = 20  # SKUs looked up in the seller's account
OZON_LIMITS = (
    "at most 1000 items a request and 50 requests a second per Client-Id; 10 price updates of "
    "one product an hour: the 11th waits until the oldest of the ten is an hour old, a product "
    "Ozon refused for it goes again an hour later"
)


def sample_skus(settings: Settings, most: int = OZON_SAMPLE) -> list[str] | None:
    """The latest SKUs of prices the service took (None: the database cannot say)."""
    from sqlalchemy import select

    from exchange.db.schema import aggregates

    try:
        engine = engine_for(settings.database_url)
    except ExchangeError:
        return None
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                select(aggregates.c.sku)
                .where(aggregates.c.kind == "price", aggregates.c.sku.is_not(None))
                .order_by(aggregates.c.id.desc())
                .limit(most * 4)
            ).scalars()
            return list(dict.fromkeys(str(sku) for sku in rows))[:most]
    except Exception:
        return None
    finally:
        engine.dispose()


def ozon_articles(settings: Settings, skus: list[str]) -> dict[str, str]:
    from exchange.db.articles import DbArticles

    engine = engine_for(settings.database_url)
    try:
        return DbArticles(engine).of(skus)
    finally:
        engine.dispose()


async def _check_ozon(
    settings: Settings, transport: httpx.AsyncBaseTransport | None
) -> list[CheckResult]:
    accepted = f"Ozon key accepted ({safe_http_url(settings.ozon_api_url)})"
    writes = "Ozon key may set prices (/v1/product/import/prices)"
    resolves = "Ozon: a sample of SKUs resolves to offer_ids"
    limits = "Ozon limits"
    try:
        key = settings.secret("ozon_api_key")
        verify = settings.site_tls()
    except ExchangeError as exc:  # an unreadable key file or CA bundle
        return [fail(accepted, str(exc)), skip(writes, "no key"), skip(resolves, "no key")]
    if not settings.ozon_client_id or not key:
        reason = "ozon_client_id and ozon_api_key_file are required"
        return [fail(accepted, reason), skip(writes, "no key"), skip(resolves, "no key")]
    target = OzonTarget(
        settings.ozon_api_url,
        settings.ozon_client_id,
        lambda: key,
        price_types=dict(settings.ozon_price_types),
        currency=settings.currency,
        sku_source=settings.sku_source,
        timeout=settings.http_timeout,
        transport=transport,
        verify=verify,
    )
    try:
        roles = await target.roles()
        if not isinstance(roles, Roles):
            why = _ozon_skipped(roles)
            return [
                fail(accepted, roles.detail),
                skip(writes, why),
                skip(resolves, why),
                ok(limits, OZON_LIMITS),
            ]
        expires = f"; it expires {roles.expires_at}" if roles.expires_at else ""
        results = [
            ok(
                accepted,
                f"Client-Id {settings.ozon_client_id}, roles {', '.join(roles.names)}{expires}",
            )
        ]
        results.append(
            ok(writes)
            if roles.may_write
            else fail(
                writes,
                "the key's roles lack /v1/product/import/prices: give the key a role that may "
                "set prices (Seller account: Settings → Seller API)",
            )
        )
        results.append(await _ozon_sample(settings, target, resolves, roles.may_read))
        results.append(ok(limits, OZON_LIMITS))
        return results
    finally:
        await target.aclose()


def _ozon_skipped(refused: Classification) -> str:
    """Why the checks after the key's were skipped: the key refused, or no answer of Ozon's
    about the key at all (a wrong ozon_api_url's 404: review ozon, "the key is refused" was
    said of a key Ozon never saw)."""
    if refused.error_class in KEY_PAUSES:
        return "the key is refused"
    if "check ozon_api_url" in refused.detail:
        return "ozon_api_url is not Ozon's API (check it)"
    return "the key could not be checked"


async def _ozon_sample(
    settings: Settings, target: OzonTarget, what: str, may_read: bool
) -> CheckResult:
    if not may_read:
        return skip(what, "the key's roles lack /v5/product/info/prices")
    skus = await asyncio.to_thread(sample_skus, settings)
    if skus is None:
        return skip(what, "the database cannot say which SKUs the service took")
    if not skus:
        return skip(what, "no price taken yet")
    offers = {sku: sku for sku in skus}
    without: list[str] = []
    if settings.sku_source == "article":
        found = await asyncio.to_thread(ozon_articles, settings, skus)
        without = [sku for sku in skus if sku not in found]
        offers = {sku: found[sku] for sku in skus if sku in found}
    held = await target.offers(list(offers.values()))
    if isinstance(held, Classification):
        return fail(what, held.detail)
    missing = [
        f"{sku} ({offer})" if sku != offer else sku
        for sku, offer in offers.items()
        if offer not in held
    ]
    # §1.1: currency_code must be the account's settlement currency; the sample's prices say
    # which it is (rev32p: a BYN account with the channel's currency RUB quarantined every
    # price while check passed)
    other = sorted(
        {
            str(code)
            for entry in held.values()
            if (code := (entry.get("price") or {}).get("currency_code"))
            and code != settings.currency
        }
    )
    if other:
        return fail(
            what,
            f"the account's prices are in {', '.join(other)}, this channel's currency is "
            f'{settings.currency}: set currency = "{other[0]}" for it (Ozon refuses a price '
            "in another currency than the account's)",
        )
    if not missing and not without:
        return ok(what, f"{len(skus)} of {len(skus)} found")
    parts = []
    if missing:
        parts.append(
            f"{len(missing)} of {len(skus)} not in the seller's account: {', '.join(missing[:5])}"
        )
    if without:
        parts.append(f"{len(without)} of {len(skus)} without an article: {', '.join(without[:5])}")
    return fail(what, "; ".join(parts))


# -- the report directory -----------------------------------------------------------------------

REPORT_WHAT = "report directory writable"


def check_report_dir(directory: Path | None) -> CheckResult:
    if directory is None:
        return skip(REPORT_WHAT, "EXCHANGE_REPORT_DIR is not set (no scheduled report)")
    what = f"{REPORT_WHAT} ({directory})"
    if directory.exists() and not directory.is_dir():
        return fail(what, "exists and is not a directory")
    # run creates a missing directory (with its parents): then the nearest existing ancestor is
    # the one that must be writable. Probing it leaves nothing behind, not even the directory.
    target = directory
    while not target.exists() and target.parent != target:
        target = target.parent
    try:
        with _probe(target):
            pass
    except OSError as exc:
        return fail(what, f"cannot write a file in {target}: {exc.strerror or exc}")
    if target != directory:
        return ok(what, f"does not exist yet; run creates it in {target}")
    return ok(what)


@contextmanager
def _probe(directory: Path) -> Iterator[None]:
    fd, name = tempfile.mkstemp(prefix=".exchange-check-", dir=directory)
    try:
        os.write(fd, b"check")
        yield
    finally:
        os.close(fd)
        os.unlink(name)


# -- all of them ----------------------------------------------------------------------------------


def run_checks(
    settings: Settings,
    source: Path | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> list[CheckResult]:
    """Every check, in the documented order."""
    results = [check_configuration(settings, source)]
    engine = engine_for(settings.database_url)
    separate = settings.staging_url and settings.staging_url != settings.database_url
    staging_engine = engine_for(settings.staging_url) if separate and settings.staging_url else None
    try:
        database = _database_checks(engine, "database")
        results += database
        if staging_engine is not None:
            database = _database_checks(staging_engine, "staging database")
            results += database
        if database[0].passed:  # the database that holds staging_intents answered
            results.append(check_staging_table(staging_engine or engine))
        else:
            results.append(skip(f"staging table {STAGING_TABLE}", "its database is unreachable"))
    finally:
        engine.dispose()
        if staging_engine is not None:
            staging_engine.dispose()
    results += check_source(settings, engine)
    results += check_channels(settings, transport)
    results.append(check_report_dir(settings.report_dir))
    results += check_serve(settings)
    results += check_notifications(settings)
    return results


def check_channels(
    settings: Settings, transport: httpx.AsyncBaseTransport | None = None
) -> list[CheckResult]:
    """Each channel's target, checked as the one target is (``check_target``), each line
    naming the channel of EXCHANGE_CHANNELS and its settings in the channel's words; the one
    channel of a configuration without it, exactly as before."""
    results = []
    for channel in settings.channels_in_force():
        for result in check_target(channel.settings, transport):
            if channel.explicit:
                # named by the line already: not again by the settings' own words
                detail = channel_words(result.detail).removeprefix(f"channel {channel.name}: ")
                result = replace(result, detail=detail, channel=channel.name)
            results.append(result)
    return results


def check_notifications(settings: Settings) -> list[CheckResult]:
    """One line per configured way of the operators' notifications: SMTP connected (and
    STARTTLS, login) or the bot known to Telegram (getMe); nothing is sent. None when off."""
    results = []
    for messenger in messengers(settings):
        what = f"notifications by {messenger.name}"
        try:
            results.append(ok(what, messenger.check()))
        except ExchangeError as exc:
            results.append(fail(what, str(exc)))
    return results


# -- exchange serve (contract 9): checked when one of its ways in is configured ---------------


def check_serve(settings: Settings) -> list[CheckResult]:
    """The HTTP side's lines: none when no way in is configured (serve would answer nothing
    but refusals); else its listening rule, the 1C exchange, its folder, the JSON intake."""
    if not (settings.onec_user or settings.onec_password or settings.onec_password_file) and not (
        settings.intake_token or settings.intake_token_file
    ):
        return []
    results = [_check_listen(settings), _check_onec(settings)]
    if results[-1].status is Status.OK:
        folder = onec_folder(settings)
        folder_check = check_report_dir(folder)
        results.append(
            CheckResult(folder_check.status, f"1C exchange folder ({folder})", folder_check.detail)
        )
    results.append(_check_secret(settings, "intake_token", "JSON intake (/api/v1/intents)"))
    return results


def _check_listen(settings: Settings) -> CheckResult:
    what = f"serve listens on {settings.http_host}:{settings.http_port}"
    refusal = settings.http_plain_refusal()
    if refusal is not None:
        return fail(what, refusal)
    if settings.staging_url and settings.staging_url != settings.database_url:
        return fail(
            what,
            "serve stages into the service's database; EXCHANGE_STAGING_URL names "
            "another one (not supported by serve yet)",
        )
    if settings.http_tls_cert is not None and settings.http_tls_key is not None:
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                settings.http_tls_cert, settings.http_tls_key
            )
        except (OSError, ValueError) as exc:
            return fail(what, f"the certificate or key cannot be used: {exc}")
        return ok(what, "HTTPS")
    return ok(what, "behind a TLS proxy" if settings.http_behind_proxy else "loopback, plain HTTP")


def _check_onec(settings: Settings) -> CheckResult:
    what = "1C exchange (/1c_exchange.php)"
    try:
        password = settings.secret("onec_password")
    except ExchangeError as exc:
        return fail(what, str(exc))
    if not settings.onec_user or not password:
        return skip(what, "closed: EXCHANGE_1C_USER and EXCHANGE_1C_PASSWORD are not both set")
    if not settings.onec_price_types:
        return fail(what, "EXCHANGE_1C_PRICE_TYPES is empty: every price would be refused")
    types = ", ".join(sorted(settings.onec_price_types))
    return ok(what, f"open; price types sent: {types}")


def _check_secret(settings: Settings, name: str, what: str) -> CheckResult:
    try:
        value = settings.secret(name)
    except ExchangeError as exc:
        return fail(what, str(exc))
    return ok(what, "open") if value else skip(what, f"closed: EXCHANGE_{name.upper()} is not set")


def _database_checks(engine: Engine, label: str) -> list[CheckResult]:
    reachable = check_reachable(engine, label)
    if not reachable.passed:
        return [reachable, skip(f"{label} migrated to the latest revision", "unreachable")]
    return [reachable, check_migrated(engine, label)]
