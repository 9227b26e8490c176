"""1C-Bitrix as a ``Target`` (contract 10): the service is 1C's client of the site's exchange
(``/bitrix/admin/1c_exchange.php``), as 1C itself is.

One exchange per request, the whole leased batch one package (``requests``), run under a lock so
that one process never has two at once (Bitrix's ``init`` empties its upload folder and its
import keeps one set of temporary tables; across processes: run one worker for this target,
docs/targets.md):

    checkauth   Basic; keep the session cookie and ``sessid`` (sent on every later request)
    init        ``zip=yes|no``, ``file_limit=N``
    file        the package (zipped when ``zip=yes``) in chunks of at most ``file_limit`` bytes
    import      repeated while it answers ``progress``, at most ``max_import_steps`` times

``success`` delivers every message of the package. ``failure`` is judged by the component's
own messages (messages.py, from its language files), never by fragments of words: at checkauth
(or 401/403 there) the credentials are refused -> PAUSE; after it, the authorization and
source-check messages, 401/403, a redirect (to a sign-in page) or the sign-in form say the
session is gone: one new checkauth and the package sent again, and a second time for the same
package -> PAUSE that says so; permission, module, session id change, database server time
(and an unknown command, metadata) -> PAUSE; temporary folder, file write or open, HTTP read,
zip, tables and indexes -> TEMPORARY, site-wide (not charged); an element's error or a text the
table does not know -> TERMINAL, and a package of several SKUs refused for good is split in
halves and sent again, so that one bad SKU never takes the others to quarantine. An import that
never ends -> TEMPORARY. Other statuses by the table every target shares (targets/wire.py); an
answer that is none of the words (an HTML page) -> UNKNOWN. Answers are read in the charset the
site names, else UTF-8, else windows-1251 (what Bitrix sends).
Each step waits for the worker's pace (``pace_with``, contract 5c).
A request cut off after it went out -> TEMPORARY with the result unknown: the package is sent
whole again (an absolute write, harmless), and Bitrix's import moves only while its client
calls ``import``, so an abandoned exchange applies at most the step in flight.
"""

from __future__ import annotations

import asyncio
import io
import logging
import math
import re
import ssl
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, urlencode

import httpx

from exchange.domain.pause import KNOWN_PRICES_UNREAD, SETTING_MISSING
from exchange.domain.reasons import Reason
from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.base import UNPACED, OutgoingMessage, Pacer
from exchange.targets.bitrix.lock import ExchangeLock, ProcessLock
from exchange.targets.bitrix.messages import Kind, recognise
from exchange.targets.bitrix.package import Price, build
from exchange.targets.prices import NO_KNOWN_PRICES, KnownPrices, read_price
from exchange.targets.shop_api.batch import chunks
from exchange.targets.wire import (
    STATUSES,
    http_client,
    httpx_failure,
    paced_request,
    transport_verdict,
)

log = logging.getLogger(__name__)

USER_AGENT = "1C+Enterprise/8.3 (exchange)"
FILENAME = "offers.xml"
ZIPNAME = "offers.zip"
BODY_CAP = 64 * 1024
DEFAULT_FILE_LIMIT = 204_800

LOST_SESSION = "BitrixLostSession"  # error_class of an answer that says the session is gone
SESSION_LOST_TWICE = "BitrixSessionLostTwice"
# What Bitrix's sign-in form holds (main module's system.auth.form: form_auth, USER_PASSWORD):
# the page a request outside the session gets instead of the component's words.
SIGN_IN_FORM = re.compile(r"<form[^>]*>.*?(type=[\"']?password|USER_PASSWORD)", re.I | re.S)
# The shared table of statuses (targets/wire.py), with Bitrix's difference: after checkauth,
# the exchange lives in the session, so 401/403 and a redirect (to a sign-in page) say the
# session is gone, not the credentials.
AFTER_CHECKAUTH_LOST = frozenset({401, 403})

Password = Callable[[], str | None]


class _Stop(Exception):
    def __init__(self, classification: Classification) -> None:
        super().__init__(classification.detail)
        self.classification = classification


@dataclass(frozen=True, slots=True)
class _Session:
    cookie: tuple[str, str]
    sessid: str | None


def decode(response: httpx.Response) -> str:
    """The answer's text: the charset it names, else UTF-8, else windows-1251."""
    raw = response.content[:BODY_CAP]
    charset = response.charset_encoding
    for encoding in (charset, "utf-8", "windows-1251"):
        if not encoding:
            continue
        try:
            return raw.decode(encoding).lstrip("\ufeff")
        except (LookupError, UnicodeDecodeError):
            continue
    return raw.decode("windows-1251", errors="replace")


def classify_failure(text: str, step: str) -> Classification:
    """``failure`` and its text, at ``step``, by the component's own messages (messages.py):
    at checkauth, the credentials or the site's setup refused (PAUSE); after it, a lost session
    (signed in again, once, by the target), the site's setup (PAUSE), the site's temporary
    trouble (TEMPORARY, site-wide: not charged), or the element's error or a text the table does
    not know (TERMINAL: the package is split until the SKU stands alone). The detail is the
    site's own words."""
    reason = text.strip()[:300] or "(no reason given)"
    detail = f"{step}: failure: {reason}"
    message = recognise(reason)
    if step == "checkauth":
        return Classification(Verdict.PAUSE, detail, error_class="BitrixAuth")
    kind = message.kind if message is not None else Kind.ELEMENT
    if kind is Kind.LOST_SESSION:
        return Classification(Verdict.TEMPORARY, detail, error_class=LOST_SESSION)
    if kind is Kind.CONFIGURATION:
        return Classification(Verdict.PAUSE, detail, error_class="BitrixConfiguration")
    if kind is Kind.SITE:
        return Classification(
            Verdict.TEMPORARY, detail, error_class="BitrixSiteFailure", site_wide=True
        )
    return Classification(
        Verdict.TERMINAL, detail, error_class="BitrixFailure", reason=Reason.SHOP_FAILURE
    )


def exchange_url(typed: str, params: dict[str, str]) -> str:
    """The address of one step as 1C's own exchange forms it: ``?type=…&mode=…`` (then
    ``sessid``, then ``filename``) appended as text to the address its administrator typed,
    even one that already holds a query (``…?key=v?type=catalog&mode=…``), never merged into
    it. Receivers other than Bitrix are set up for exactly that: wc1c's receiver address ends
    in ``&get_param``, so that 1C's ``?type`` arrives as the parameter ``get_param?type``
    (wc1c/wc1c-main src/Schemas/Productscml/Receiver.php, ``getModeAndType``); a merged query
    reaches it with no type and no mode. The order of the parameters is the one 1C's
    emulators send to Bitrix (checkauth, then init/file/import with ``sessid`` before
    ``filename``; docs/targets.md); values are percent-encoded as a query's."""
    return f"{typed}?{urlencode(params, quote_via=quote)}"


class BitrixTarget:
    name = "bitrix"

    def __init__(
        self,
        url: str,
        user: str,
        password: Password,
        *,
        catalog_id: str,
        price_types: dict[str, str | None],
        max_import_steps: int,
        timeout: float,
        transport: httpx.AsyncBaseTransport | None = None,
        lock: ExchangeLock | None = None,
        lock_wait: float = 10.0,
        verify: ssl.SSLContext | None = None,
        known: KnownPrices = NO_KNOWN_PRICES,
    ) -> None:
        """``lock``: one exchange at a time across processes (``exchange.db.target_lock``);
        held for ``2 x timeout + 1`` s and renewed before every request (so that it outlasts
        one request, and a dead holder's ends soon); waited for up to ``lock_wait`` seconds,
        then the package is temporary (sent later). ``verify``: the TLS context of
        EXCHANGE_SITE_CA_BUNDLE (None: the default CAs). ``known``: the latest price of each
        price type the service delivered or is delivering (``exchange.db.known_prices``): each
        offer carries them beside the prices it sends."""
        self.known = known
        self.url = url
        self.lock: ExchangeLock = lock or ProcessLock()
        self.lock_wait = lock_wait
        self.lock_seconds = 2 * timeout + 1
        self._holding = False
        self.user = user
        self._password_source = password
        self._password = password()
        self.catalog_id = catalog_id
        self.price_types = dict(price_types)
        self.max_import_steps = max_import_steps
        self._http = http_client(
            timeout=timeout, verify=verify, transport=transport, headers={"User-Agent": USER_AGENT}
        )
        self._one_at_a_time = asyncio.Lock()
        # After an import whose answer was lost, the package goes again once the step that may
        # still run on the site has had its time (contract 10: "once the older request's window
        # has passed"): the HTTP timeout, as a Retry-After.
        self.window = str(max(1, math.ceil(timeout)))
        self.requests_sent = 0
        self._pacer: Pacer = UNPACED

    def pace_with(self, pacer: Pacer) -> None:
        """Each step (checkauth, init, every file chunk, every import) waits for the worker's
        pace (contract 5c)."""
        self._pacer = pacer

    # -- the seam --------------------------------------------------------------------------

    def requests(self, messages: Sequence[OutgoingMessage]) -> list[list[OutgoingMessage]]:
        """The whole lease is one package (one exchange): the fewer exchanges the better."""
        return chunks(messages, max(len(messages), 1)) if messages else []

    async def send(self, messages: Sequence[OutgoingMessage]) -> list[Classification]:
        answers: dict[str, Classification] = {}
        ready: list[tuple[OutgoingMessage | None, Price]] = []
        for message in messages:
            judged = self._read(message)
            if isinstance(judged, Classification):
                answers[message.message_id] = judged
            else:
                ready.append((message, judged))
        if ready:
            async with self._one_at_a_time:
                busy = await self._take_lock()
                try:
                    if busy is not None:
                        answers.update({m.message_id: busy for m, _ in ready if m is not None})
                    else:
                        await self._deliver_with_known_prices(ready, answers)
                finally:
                    if self._holding:
                        self._holding = False
                        await asyncio.to_thread(self.lock.release)
        return [answers[m.message_id] for m in messages]

    async def _take_lock(self) -> Classification | None:
        """None once held; else why not (another worker's exchange with the site runs)."""
        deadline = asyncio.get_running_loop().time() + self.lock_wait
        while True:
            if await asyncio.to_thread(self.lock.acquire, self.lock_seconds):
                self._holding = True
                return None
            if asyncio.get_running_loop().time() >= deadline:
                return Classification(
                    Verdict.TEMPORARY,
                    "another worker's exchange with this Bitrix site is running; sent later",
                    error_class="ExchangeBusy",
                    retry_after=str(math.ceil(self.lock_wait)),
                )
            await asyncio.sleep(0.2)

    async def health(self) -> Classification:
        try:
            await self._checkauth()
        except _Stop as stop:
            return stop.classification
        return Classification(Verdict.DELIVERED, "checkauth: success")

    async def check(self) -> tuple[Classification, str]:
        """For ``exchange check``: checkauth and init (init empties the site's upload folder:
        not while 1C's own exchange runs). Returns the verdict and what init answered."""
        async with self._one_at_a_time:
            try:
                session = await self._checkauth()
                zipped, limit = await self._init(session)
            except _Stop as stop:
                return stop.classification, ""
        return (
            Classification(Verdict.DELIVERED, "checkauth and init: success"),
            f"zip={'yes' if zipped else 'no'} file_limit={limit}",
        )

    def reload_credentials(self) -> bool:
        before, self._password = self._password, self._password_source()
        return self._password != before

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- one package -----------------------------------------------------------------------

    def _read(self, message: OutgoingMessage) -> Price | Classification:
        price = read_price(
            message,
            target="bitrix",
            mapping=self.price_types,
            setting="EXCHANGE_BITRIX_PRICE_TYPES",
        )
        if isinstance(price, Classification):
            return price
        return Price(price.sku, price.mapped, price.amount, price.currency)

    async def _deliver_with_known_prices(
        self, ready: list[tuple[OutgoingMessage | None, Price]], answers: dict[str, Classification]
    ) -> None:
        """The known prices are read while this worker holds the site's exchange: no other
        package can land between the reading and this one, so what rides beside the batch is
        never older than what the site holds (a sibling leased later goes after this one)."""
        try:
            ready = await self._with_known_prices(ready)
        except Exception as exc:  # the port's store failed: never send an offer half-known
            # A pause, not the site's temporary failure: the site is well (no breaker, no
            # «сайт не отвечает»), the service's own database is not, and sending anyway
            # deletes prices. Bitrix's own importer deletes every price of a product that an
            # offer does not name (CIBlockCMLImport::SetProductPrice, $arToDelete), as wc1c
            # clears them: the package waits for a person or a trial that reads them again.
            unread = Classification(
                Verdict.PAUSE,
                f"the latest known prices could not be read: {type(exc).__name__}",
                error_class=KNOWN_PRICES_UNREAD,
            )
            answers.update({m.message_id: unread for m, _ in ready if m is not None})
            return
        await self._deliver(ready, answers)

    async def _with_known_prices(
        self, ready: list[tuple[OutgoingMessage | None, Price]]
    ) -> list[tuple[OutgoingMessage | None, Price]]:
        """The batch's prices, and beside them, for each of its SKUs, the latest known price of
        every other mapped price type (contract 10). A receiver reads an offer's prices as its
        whole set: wc1c sets each price type it maps from the offer, to '' when the offer does
        not name it (wc1c/wc1c src/Schemas/Productscml/Core.php, assignOffersItemPrices), so a
        package with only the sale price would clear the regular one. Those extra prices carry
        no message (None): they ride with the package, delivered or not with it."""
        sent = {(price.sku, price.price_type) for _, price in ready}
        known = await asyncio.to_thread(self.known.latest, sorted({p.sku for _, p in ready}))
        beside: list[tuple[OutgoingMessage | None, Price]] = []
        for price in sorted(known, key=lambda k: (k.sku, k.price_type)):
            mapped = self.price_types.get(price.price_type)
            if mapped is None or (price.sku, mapped) in sent:
                continue  # left out of this shop, not mapped, or sent now
            sent.add((price.sku, mapped))
            beside.append((None, Price(price.sku, mapped, price.amount, price.currency)))
        return [*ready, *beside]

    async def _deliver(
        self, ready: list[tuple[OutgoingMessage | None, Price]], answers: dict[str, Classification]
    ) -> None:
        verdict = await self._exchange([price for _, price in ready])
        skus = {price.sku for _, price in ready}
        if verdict.verdict is Verdict.TERMINAL and len(skus) > 1:
            # Refused for good: find the SKU(s) it refuses, deliver the others.
            order = list(dict.fromkeys(price.sku for _, price in ready))
            half = set(order[: len(order) // 2])
            await self._deliver([r for r in ready if r[1].sku in half], answers)
            await self._deliver([r for r in ready if r[1].sku not in half], answers)
            return
        for message, _ in ready:
            if message is not None:
                answers[message.message_id] = verdict

    async def _exchange(self, prices: list[Price]) -> Classification:
        """One package: a session the site lost on the way (contract 10) means one new
        checkauth and the package sent again; lost again, the site's setup is at fault."""
        package = build(prices, catalog_id=self.catalog_id, now=datetime.now(UTC))
        first = await self._exchange_once(package)
        if first.error_class != LOST_SESSION:
            return first
        log.info("%s; signing in again (checkauth) and sending the package again", first.detail)
        again = await self._exchange_once(package)
        if again.error_class != LOST_SESSION:
            return again
        return Classification(
            Verdict.PAUSE,
            f"the site lost the session twice for one package, the second time right after a "
            f"new checkauth ({again.detail}): its sessions do not last from one request to the "
            "next (session storage, a load balancer, a proxy or cache in front of "
            "/bitrix/admin/1c_exchange.php)",
            http_status=again.http_status,
            error_class=SESSION_LOST_TWICE,
        )

    async def _exchange_once(self, package: bytes) -> Classification:
        try:
            session = await self._checkauth()
            zipped, limit = await self._init(session)
            if zipped:
                buffer = io.BytesIO()
                with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
                    archive.writestr(FILENAME, package)
                data, name = buffer.getvalue(), ZIPNAME
            else:
                data, name = package, FILENAME
            for start in range(0, len(data), limit):
                await self._step(session, "file", name, data[start : start + limit])
            for _ in range(self.max_import_steps):
                word, text = await self._step(session, "import", FILENAME)
                if word == "success":
                    return Classification(
                        Verdict.DELIVERED, f"import: success {text[:200]}".strip()
                    )
            return Classification(
                Verdict.TEMPORARY,
                f"import: still progress after {self.max_import_steps} steps "
                "(EXCHANGE_BITRIX_MAX_IMPORT_STEPS); the package is sent again",
                error_class="ImportNeverEnds",
            )
        except _Stop as stop:
            return stop.classification

    # -- the protocol ----------------------------------------------------------------------

    async def _checkauth(self) -> _Session:
        if not self.user or not self._password:
            raise _Stop(
                Classification(
                    Verdict.PAUSE,
                    "EXCHANGE_BITRIX_USER or EXCHANGE_BITRIX_PASSWORD is not set",
                    error_class=SETTING_MISSING,
                )
            )
        response = await self._call(
            "GET",
            {"type": "catalog", "mode": "checkauth"},
            None,
            "checkauth",
            auth=httpx.BasicAuth(self.user, self._password),
        )
        word, text = self._words(response, "checkauth")
        lines = text.splitlines()
        if word != "success" or len(lines) < 2:
            raise _Stop(
                Classification(
                    Verdict.UNKNOWN, "checkauth: no cookie in the answer", http_status=200
                )
            )
        sessid = next((line[7:] for line in lines[2:] if line.startswith("sessid=")), None)
        return _Session((lines[0].strip(), lines[1].strip()), sessid)

    async def _init(self, session: _Session) -> tuple[bool, int]:
        response = await self._call(
            "GET", self._params(session, "init"), None, "init", session=session
        )
        text = decode(response)
        values = dict(line.strip().split("=", 1) for line in text.splitlines() if "=" in line)
        if "zip" not in values and "file_limit" not in values:
            self._words(response, "init")  # failure text, or an unreadable answer
        try:
            limit = int(values.get("file_limit", DEFAULT_FILE_LIMIT))
        except ValueError:
            limit = DEFAULT_FILE_LIMIT
        return values.get("zip", "no").strip() == "yes", max(limit, 1024)

    async def _step(
        self, session: _Session, mode: str, filename: str, body: bytes | None = None
    ) -> tuple[str, str]:
        params = {**self._params(session, mode), "filename": filename}
        response = await self._call(
            "POST" if body is not None else "GET", params, body, mode, session=session
        )
        return self._words(response, mode)

    def _params(self, session: _Session, mode: str) -> dict[str, str]:
        params = {"type": "catalog", "mode": mode}
        if session.sessid:
            params["sessid"] = session.sessid
        return params

    def _words(self, response: httpx.Response, step: str) -> tuple[str, str]:
        text = decode(response)
        first, _, rest = text.partition("\n")
        word = first.strip().lower()
        if word == "failure":
            raise _Stop(classify_failure(rest, step))
        if word in ("success", "progress"):
            return word, rest
        if step != "checkauth" and SIGN_IN_FORM.search(text):
            raise _Stop(
                Classification(
                    Verdict.TEMPORARY,
                    f"{step}: the site answered its sign-in form: the session is gone",
                    http_status=response.status_code,
                    error_class=LOST_SESSION,
                )
            )
        raise _Stop(
            Classification(
                Verdict.UNKNOWN,
                f"{step}: an answer that is not success, progress or failure "
                f"({first.strip()[:60]!r})",
                http_status=response.status_code,
            )
        )

    async def _call(
        self,
        method: str,
        params: dict[str, str],
        body: bytes | None,
        step: str,
        *,
        session: _Session | None = None,
        auth: httpx.BasicAuth | None = None,
    ) -> httpx.Response:
        headers = {"Cookie": f"{session.cookie[0]}={session.cookie[1]}"} if session else None

        async def renew_lock() -> None:
            """After the pace's turn (a hold may be long), right before the step goes."""
            if self._holding and not await asyncio.to_thread(self.lock.acquire, self.lock_seconds):
                raise _Stop(
                    Classification(
                        Verdict.TEMPORARY,
                        f"{step}: the exchange lock was lost (a step outlasted it); sent again",
                        error_class="ExchangeBusy",
                    )
                )
            self.requests_sent += 1

        try:
            response = await paced_request(
                self._http,
                self._pacer,
                method,
                exchange_url(self.url, params),
                ready=renew_lock,
                content=body,
                headers=headers,
                auth=auth,
            )
        except httpx.TransportError as exc:
            # Only an import applies anything: a file step cut off is simply sent again.
            failure = httpx_failure(exc)
            judged = transport_verdict(
                failure, step=step, result_unknown=failure.maybe_sent and step == "import"
            )
            if judged.result_unknown:
                judged.detail += "; the package is sent again"
                judged.retry_after = self.window
            raise _Stop(judged) from None
        status = response.status_code
        if 200 <= status < 300:
            return response
        detail = f"{step}: HTTP {status}"
        if step != "checkauth" and (300 <= status < 400 or status in AFTER_CHECKAUTH_LOST):
            where = response.headers.get("Location")
            raise _Stop(
                Classification(
                    Verdict.TEMPORARY,
                    f"{detail}{f' to {where[:200]}' if where else ''}: the session is gone",
                    http_status=status,
                    error_class=LOST_SESSION,
                )
            )
        verdict = STATUSES.verdict(status)
        raise _Stop(
            Classification(
                verdict,
                detail,
                http_status=status,
                retry_after=response.headers.get("Retry-After")
                if verdict is Verdict.TEMPORARY
                else None,
            )
        )
