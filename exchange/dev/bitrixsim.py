"""A simulator of a 1C-Bitrix site's catalogue exchange (``/bitrix/admin/1c_exchange.php``), the
side 1C talks to (contract 10), written from the ``catalog.import.1c`` component's own source
(repository avshatalov48/bitrix-core-business, ``modules/catalog/install/components/bitrix/
catalog.import.1c/component.php``; its texts from ``lang/ru/component.php`` as installed, e.g.
repository Dev-tester/TechStore, and ``lang/en/component.php``):

    checkauth   Basic auth -> ``success\n<cookie name>\n<cookie value>\nsessid=…\ntimestamp=…``
                (and Set-Cookie) (component.php: the "checkauth" branch, bitrix_sessid_get())
    init        forgets the session's files -> ``zip=yes|no\nfile_limit=N`` (the "init" branch)
    file        the raw body appended to the named file (the "file" branch: fopen "ab")
    import      unpacks an uploaded zip on its first step (``progress``), then applies
                ``step_size`` offers per call (``progress``) until ``success``

As Bitrix does: every answer in windows-1251 (component.php converts its output and sends
``Content-Type: text/html; charset=windows-1251``; ``utf8=True`` answers UTF-8, as receivers
other than Bitrix may); the security checks run in component.php's order before any mode but
checkauth: the source check (``sessid``, once the site has seen a valid one:
``DEFAULT_SKIP_SOURCE_CHECK`` turns to "N"), then the authorization, each answering ``failure``
with the component's own message (``MESSAGES``); a mode it does not take -> "Неизвестная
команда."; a package with ``СодержитТолькоИзменения="false"`` deactivates every offer it does
not name (``deactivated``).

Faults (attributes): ``refuse`` (checkauth fails), ``reject`` SKUs (import ``failure`` naming the
offer: a package holding one is refused whole), ``poison`` SKUs (the import answers HTTP 500),
``progress_forever``, ``lose_session`` (how many of the next imports find their session gone),
``session_lost_as`` how a lost session answers: ``message`` (the component's failure),
``redirect`` (302 to a sign-in page, as a proxy or an admin section behind a login does) or
``form`` (the sign-in form, HTML with status 200, as Bitrix's admin prolog shows it),
``answer_fault`` ``html`` (a PHP fatal error page), ``failure_text`` (every import answers
failure with it), ``delay`` (seconds before each answer), ``import_delay`` (seconds an import
step takes, after it applied: a client that gives up first does not know the result),
``no_permission`` (the user signs in, but is in none of the component's GROUP_PERMISSIONS:
every later mode answers CC_BSC1_PERMISSION_DENIED), ``checkauth_failure`` (a MESSAGES key that
checkauth answers a signed-in user: session id change, database server time),
``rate_limit`` (requests per second above which the host's rate limiter, in front of PHP,
answers 429 with Retry-After: 1 and its own HTML page, as hosting limiters do; ``rate_burst``
seconds of it taken at once).

Bookkeeping: ``history(sku)`` every price an offer's price type ``Розничная`` (``history_type``)
took, in order; ``requests`` counts requests by mode; ``packages`` the XML of each imported one.
"""

from __future__ import annotations

import base64
import collections
import io
import re
import secrets
import threading
import time
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from exchange.dev.httpsim import RATE_LIMITED_PAGE, Handler, LoopbackServer, RateLimit, php_get

PATH = "/bitrix/admin/1c_exchange.php"
COOKIE = "PHPSESSID"

# The component's own texts (lang/ru/component.php), by their keys in component.php.
MESSAGES = {
    "CC_BSC1_ERROR_SOURCE_CHECK": "Ошибка проверки источника запроса. Обновите модуль обмена "
    "или отключите проверку в настройках компонента.",
    "CC_BSC1_ERROR_AUTHORIZE": "Ошибка авторизации. Неверное имя пользователя или пароль.",
    "CC_BSC1_ERROR_UNKNOWN_COMMAND": "Неизвестная команда.",
    "CC_BSC1_ERROR_FILE_ERROR": "Ошибка открытия файла импорта.",
    "CC_BSC1_ZIP_PROGRESS": "Идет распаковка архива.",
    "CC_BSC1_FILE_READ": "Файл импорта прочитан.",
    "CC_BSC1_PROGRESS": "Обработано #DONE# из #TOTAL# элементов.",
    "CC_BSC1_IMPORT_SUCCESS": "Импорт успешно завершен.",
    "CC_BSC1_PERMISSION_DENIED": "У Вас нет прав для импорта каталога. Проверьте настройки "
    "компонента импорта.",
    "CC_BSC1_ERROR_SESSION_ID_CHANGE": "Включена смена идентификатора сессий. В файле "
    "подключения компонента обмена, до подключения пролога определите константу "
    "BX_SESSION_ID_CHANGE: define('BX_SESSION_ID_CHANGE', false);",
    "CC_BSC1_ERROR_DATABASE_SERVER_TIME": "Время на сервере базы данных отличается от времени на "
    "веб-сервере больше, чем на 10 минут. Вероятно неправильно настроены временные зоны. "
    "Выполните настройку и повторите обмен.",
}
# HasScriptExtension (main module, GetScriptFileExt's default list): a file 1C may not upload.
SCRIPT_EXTENSIONS = (
    ".php",
    ".php3",
    ".php4",
    ".php5",
    ".php6",
    ".php7",
    ".php8",
    ".phtml",
    ".pl",
    ".asp",
    ".aspx",
    ".cgi",
    ".dll",
    ".exe",
    ".ico",
    ".shtm",
    ".shtml",
    ".fcg",
    ".fcgi",
    ".fpl",
    ".asmx",
    ".pht",
    ".py",
    ".psp",
    ".var",
)
# What a request outside the session meets when the exchange's URL sits behind a login: the
# main module's sign-in form (system.auth.form: form_auth, USER_LOGIN, USER_PASSWORD).
SIGN_IN_FORM = (
    "<!DOCTYPE html><html><head><title>Авторизация</title></head><body>"
    '<form name="form_auth" method="post" target="_top" action="/bitrix/admin/index.php?login=yes">'
    '<input type="hidden" name="AUTH_FORM" value="Y"><input type="hidden" name="TYPE" value="AUTH">'
    '<input type="text" name="USER_LOGIN"><input type="password" name="USER_PASSWORD">'
    '<input type="submit" name="Login" value="Войти"></form></body></html>'
)


@dataclass
class BitrixFaults:
    refuse: bool = False
    reject: set[str] = field(default_factory=set)
    poison: set[str] = field(default_factory=set)
    progress_forever: bool = False
    lose_session: int = 0  # the next imports that find their session gone
    session_lost_as: str = "message"  # | "redirect" | "form"
    answer_fault: str | None = None
    failure_text: str | None = None
    delay: float = 0.0
    import_delay: float = 0.0  # before answering an import step (after applying it)
    rate_limit: float | None = None  # requests/s above which the host answers 429 (httpsim)
    rate_burst: float = 0.25  # seconds of rate_limit the host's bucket holds
    no_permission: bool = False  # the user signs in but is in none of GROUP_PERMISSIONS
    checkauth_failure: str | None = None  # a MESSAGES key checkauth answers a signed-in user


@dataclass
class _Session:
    sessid: str
    files: dict[str, bytearray] = field(default_factory=dict)
    offers: list[tuple[str, dict[str, str]]] | None = None
    done: int = 0
    unpacked: bool = False
    only_changes: bool = True
    open: bool = False  # between its init and its import's success or failure


class BitrixSimulator(LoopbackServer):
    def __init__(
        self,
        user: str = "exchange",
        password: str = "secret",
        *,
        zip: bool = False,
        file_limit: int = 204_800,
        step_size: int = 500,
        utf8: bool = False,
        history_type: str = "Розничная",
        receiver: str = "bitrix",
    ) -> None:
        """``receiver``: ``bitrix`` (catalog.import.1c behind /bitrix/admin/1c_exchange.php)
        or ``wc1c`` (WooCommerce's wc1c plugin: its address is
        ``/?wc1c-receiver=<id>&lazysign=<sign>&get_param``, ``receiver_url``), which reads
        ``type`` and ``mode`` its own way and then answers as Bitrix's component does, but
        applies an offer as wc1c does (``_wc1c_offer``: its prices as the whole set; an
        unknown product skipped in silence)."""
        super().__init__()
        self.handler = _BitrixHandler
        self.user, self.password = user, password
        self.zip, self.file_limit, self.step_size, self.utf8 = zip, file_limit, step_size, utf8
        self.history_type = history_type
        self.faults = BitrixFaults()
        self.sessions: dict[str, _Session] = {}
        self.sessid_required = False  # flips for good at the first request carrying one
        self.prices: dict[str, dict[str, str]] = {}
        self.active: dict[str, bool] = {}
        self.deactivated: set[str] = set()
        self._history: dict[str, list[str]] = collections.defaultdict(list)
        self.requests: collections.Counter[str] = collections.Counter()
        self.chunks: list[int] = []  # the size of every file chunk received
        self.packages: list[bytes] = []
        self.overlaps = 0  # inits while another session's exchange was unfinished
        self._limit = RateLimit()
        self.receiver = receiver
        self.lazysign = "lazy-sign-1"  # wc1c: the signature its receiver address carries
        # wc1c's price settings (products_prices_regular_by_cml = yes_name, its
        # …_from_name; the same for sale): the offer's price type named for each product field.
        self.wc1c_price_types = {"regular_price": "Розничная", "sale_price": "Распродажа"}
        # wc1c's products (found by the offer's Ид, product_sync_by_id); None: every SKU is one.
        self.wc1c_products: set[str] | None = None
        self.skipped: list[str] = []  # offers wc1c skipped (its log only; 1C is told success)
        # every request as it arrived, in order: method, query, headers (names in lower case)
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self._state = threading.RLock()

    def _wc1c(self, query: dict[str, str]) -> str | None:
        """wc1c's receiver (wc1c/wc1c-main src/Schemas/Productscml/Receiver.php): ``type`` and
        ``mode`` as ``getModeAndType`` reads them, only when its address's ``get_param`` is
        there (1C's ``?type`` appended to ``…&get_param`` arrives as ``get_param?type``); every
        mode but checkauth needs the ``lazysign`` of its address (``handlerCheckauthKey``).
        Written into ``query`` as Bitrix's component would read them; else wc1c's failure."""
        mode = kind = ""
        if query.get("get_param", "") != "" or query.get("get_param?type", "") != "":
            output = php_get(query.get("get_param", "").lstrip("?"))  # parse_str
            mode = output.get("mode", query.get("mode", ""))
            kind = output.get("type", query.get("type", "")) or query.get("get_param?type", "")
        if kind != "catalog" or not mode:
            return "failure\nSchema: action not found."
        if mode != "checkauth" and query.get("lazysign") != self.lazysign:
            return (
                "failure\nAuthorization key verification failed. 1C did not send the name of "
                "the lazy signature."
            )
        query["type"], query["mode"] = kind, mode
        return None

    @property
    def receiver_url(self) -> str:
        """The address 1C's administrator types for this receiver: wc1c shows it as
        ``get_site_url(null, '/?wc1c-receiver=' . <id> . '&lazysign=' . <md5> . '&get_param')``
        (wc1c/wc1c-main src/Schemas/Productscml/Admin.php, configurationsFieldsReceiver; the
        lazysign is ``md5(<id> . time())``, kept as the ``receiver_lazy_sign`` meta)."""
        if self.receiver == "wc1c":
            return f"{self.url}/?wc1c-receiver=1&lazysign={self.lazysign}&get_param"
        return self.url + PATH

    def _wc1c_offer(self, sku: str, prices: dict[str, str]) -> None:
        """One ``Предложение`` as wc1c applies it (wc1c/wc1c src/Schemas/Productscml/Core.php):
        ``processingOffersItem`` finds the product by the offer's ``Ид``, and when there is
        none logs "Product not found. Offer update skipped." and goes on (1C is still told
        success); ``assignOffersItemPrices`` starts from ``$regular_value = ''`` and
        ``$sale_value = ''``, takes each from the offer's price of the type its settings name,
        and calls ``set_regular_price`` and ``set_sale_price`` whatever it found: the offer's
        prices are the product's whole set, and a type the offer does not name is cleared."""
        if self.wc1c_products is not None and sku not in self.wc1c_products:
            self.skipped.append(sku)
            return
        held = self.prices.setdefault(sku, {})
        for name in self.wc1c_price_types.values():
            value = prices.get(name, "")
            if name == self.history_type and held.get(name) != value:
                self._history[sku].append(value)
            held[name] = value
        self.active[sku] = True

    def history(self, sku: str) -> list[str]:
        with self._state:
            return list(self._history[sku])

    def price(self, sku: str, price_type: str = "Розничная") -> str | None:
        with self._state:
            return self.prices.get(sku, {}).get(price_type)

    # -- the exchange --------------------------------------------------------------------

    def _refused(self) -> str:
        """component.php's security checks, in its order, for a request not signed in: the
        source check first once it is on, then the authorization."""
        key = "CC_BSC1_ERROR_SOURCE_CHECK" if self.sessid_required else "CC_BSC1_ERROR_AUTHORIZE"
        return f"failure\n{MESSAGES[key]}"

    def _checkauth(self, authorization: str | None) -> tuple[str, str | None]:
        if self.faults.refuse or not authorization or not authorization.startswith("Basic "):
            return self._refused(), None
        try:
            given = base64.b64decode(authorization[6:]).decode("utf-8")
        except ValueError:
            return self._refused(), None
        if given != f"{self.user}:{self.password}":
            return self._refused(), None
        if self.faults.checkauth_failure is not None:  # session id change, database time
            return f"failure\n{MESSAGES[self.faults.checkauth_failure]}", None
        sid, sessid = secrets.token_hex(13), secrets.token_hex(16)
        self.sessions[sid] = _Session(sessid)
        return f"success\n{COOKIE}\n{sid}\nsessid={sessid}\ntimestamp={int(time.time())}", sid

    def _session(self, cookie: str | None, sessid: str | None) -> _Session | str:
        sid = None
        for part in (cookie or "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE:
                sid = value
        session = self.sessions.get(sid or "")
        # component.php: a valid sessid from 1C turns DEFAULT_SKIP_SOURCE_CHECK to "N" for good.
        if session is not None and sessid is not None and sessid == session.sessid:
            self.sessid_required = True
        if self.sessid_required and (session is None or sessid != session.sessid):
            return f"failure\n{MESSAGES['CC_BSC1_ERROR_SOURCE_CHECK']}"
        if session is None:
            return f"failure\n{MESSAGES['CC_BSC1_ERROR_AUTHORIZE']}"
        if self.faults.no_permission:  # $bUSER_HAVE_ACCESS: admin, or one of GROUP_PERMISSIONS
            return f"failure\n{MESSAGES['CC_BSC1_PERMISSION_DENIED']}"
        return session

    def _import(self, session: _Session, filename: str) -> tuple[int, str]:
        if self.faults.failure_text is not None:
            return 200, f"failure\n{self.faults.failure_text}"
        if self.faults.progress_forever:
            return 200, "progress\nОбработка…"
        if not session.unpacked and any(n.endswith(".zip") for n in session.files):
            for name in [n for n in session.files if n.endswith(".zip")]:
                with zipfile.ZipFile(io.BytesIO(bytes(session.files.pop(name)))) as archive:
                    for member in archive.namelist():
                        session.files[member] = bytearray(archive.read(member))
            session.unpacked = True
            return 200, f"progress\n{MESSAGES['CC_BSC1_ZIP_PROGRESS']}"
        if session.offers is None:
            data = session.files.get(filename)
            if data is None:
                return 200, f"failure\n{MESSAGES['CC_BSC1_ERROR_FILE_ERROR']}"
            try:
                root = ET.fromstring(bytes(data))
            except ET.ParseError as exc:
                return 200, f"failure\nОшибка разбора XML: {exc}"
            package = root.find("ПакетПредложений")
            if package is None:
                return 200, "failure\nНет пакета предложений"
            session.only_changes = package.get("СодержитТолькоИзменения") != "false"
            offers: list[tuple[str, dict[str, str]]] = []
            for offer in package.iter("Предложение"):
                sku = offer.findtext("Ид") or ""
                prices = {
                    (p.findtext("ИдТипаЦены") or ""): (p.findtext("ЦенаЗаЕдиницу") or "")
                    for p in offer.iter("Цена")
                }
                offers.append((sku, prices))
            for sku, _ in offers:
                if sku in self.faults.poison:
                    return 500, "<html><body>Internal Server Error</body></html>"
                if sku in self.faults.reject:
                    # An element's error (the information block module's LAST_ERROR, echoed
                    # by component.php's step 7): no text of the component's own.
                    return 200, f"failure\nОшибка в предложении {sku}: неверная цена"
            session.offers = offers
            self.packages.append(bytes(data))
            return 200, f"progress\n{MESSAGES['CC_BSC1_FILE_READ']}"
        start, end = session.done, session.done + self.step_size
        for sku, prices in session.offers[start:end]:
            if self.receiver == "wc1c":
                self._wc1c_offer(sku, prices)
                continue
            held = self.prices.setdefault(sku, {})
            for price_type, value in prices.items():
                if price_type == self.history_type and held.get(price_type) != value:
                    self._history[sku].append(value)
                held[price_type] = value
            self.active[sku] = True
        session.done = min(end, len(session.offers))
        if session.done < len(session.offers):
            done = MESSAGES["CC_BSC1_PROGRESS"].replace("#DONE#", str(session.done))
            return 200, f"progress\n{done.replace('#TOTAL#', str(len(session.offers)))}"
        if not session.only_changes:
            named = {sku for sku, _ in session.offers}
            for sku in self.active:
                if sku not in named:
                    self.active[sku] = False
                    self.deactivated.add(sku)
        session.offers, session.done = None, 0
        session.files.clear()
        session.open = False
        return 200, f"success\n{MESSAGES['CC_BSC1_IMPORT_SUCCESS']}"


def safe_name(filename: str) -> str | None:
    """The name component.php writes to ($ABS_FILE_NAME), or None when it refuses it: a prefix
    of 1C on Linux (``/tmp/``, ``upload/1c/webdata``) stripped, backslashes made slashes, the
    slashes around it trimmed; a script extension (HasScriptExtension), a ``..`` segment
    (rel2abs would leave the folder) or an empty name refused. A path below the folder
    (``import_files/ab/photo.jpg``) is a name like any other."""
    name = re.sub(r"^(/tmp/|upload/1c/webdata)", "", filename)
    name = name.strip().replace("\\", "/").strip("/")
    if not name or ".." in name.split("/") or name.lower().endswith(SCRIPT_EXTENSIONS):
        return None
    return name


class _BitrixHandler(Handler):
    server_version = "nginx"

    @property
    def sim(self) -> BitrixSimulator:
        return self.server.sim  # type: ignore[attr-defined, no-any-return]

    def do_GET(self) -> None:
        self.exchange()

    def do_POST(self) -> None:
        self.exchange()

    def reply(self, text: str, status: int = 200, cookie: str | None = None) -> None:
        sim = self.sim
        encoding = "utf-8" if sim.utf8 else "windows-1251"
        headers = {"Set-Cookie": f"{COOKIE}={cookie}; path=/; HttpOnly"} if cookie else None
        self.answer(
            status, text.encode(encoding, "replace"), f"text/html; charset={encoding}", headers
        )

    def exchange(self) -> None:
        body = self.body()
        sim = self.sim
        parts = urlsplit(self.path)
        if parts.path != (PATH if sim.receiver == "bitrix" else "/"):
            self.reply("<html>404 Not Found</html>", 404)
            return
        query = php_get(parts.query)  # $_GET, as PHP reads the query
        sim.seen.append(
            (self.command, parts.query, {k.lower(): v for k, v in self.headers.items()})
        )
        mode = query.get("mode", "")
        sim.requests[mode] += 1
        if sim.faults.delay:
            time.sleep(sim.faults.delay)
        if sim._limit.refuses(sim.faults.rate_limit, sim.faults.rate_burst):
            # The host's limiter answers before PHP runs: its own HTML page, not the component's.
            self.answer(429, RATE_LIMITED_PAGE, "text/html", {"Retry-After": "1"})
            return
        if sim.receiver == "wc1c":
            refused = sim._wc1c(query)
            if refused is not None:
                self.reply(refused)
                return
        if sim.faults.answer_fault == "html":
            self.reply("<html><body><b>Fatal error</b>: Allowed memory exhausted</body></html>")
            return
        pending: tuple[int, str] | None = None
        with sim._state:
            if query.get("type") != "catalog":  # another component's exchange (sale, …)
                self.reply(f"failure\n{MESSAGES['CC_BSC1_ERROR_UNKNOWN_COMMAND']}")
                return
            if mode == "checkauth":
                text, sid = sim._checkauth(self.headers.get("Authorization"))
                self.reply(text, cookie=sid)
                return
            if mode == "import" and sim.faults.lose_session:
                sim.faults.lose_session -= 1
                sim.sessions.clear()
                if sim.faults.session_lost_as == "redirect":
                    location = f"/auth/?backurl={PATH}"
                    self.answer(302, b"", "text/html", {"Location": location})
                    return
                if sim.faults.session_lost_as == "form":
                    self.reply(SIGN_IN_FORM)
                    return
            session = sim._session(self.headers.get("Cookie"), query.get("sessid"))
            if isinstance(session, str):
                self.reply(session)
                return
            if mode == "init":
                if any(o is not session and o.open for o in sim.sessions.values()):
                    sim.overlaps += 1  # another exchange was still under way: Bitrix mixes them
                session.open = True
                session.files.clear()
                session.offers, session.done, session.unpacked = None, 0, False
                zipped = "yes" if sim.zip else "no"
                self.reply(f"zip={zipped}\nfile_limit={sim.file_limit}")
            elif mode == "file":
                name = safe_name(query.get("filename", ""))
                if name is None:
                    # no $ABS_FILE_NAME: component.php falls through to its last "else"
                    self.reply(f"failure\n{MESSAGES['CC_BSC1_ERROR_UNKNOWN_COMMAND']}")
                    return
                # component.php writes whatever arrives ("ab"); file_limit is advice to 1C,
                # never checked: ``chunks`` lets a test check that the client kept to it.
                sim.chunks.append(len(body))
                session.files.setdefault(name, bytearray()).extend(body)
                self.reply("success")
            elif mode == "import":
                status, text = sim._import(session, safe_name(query.get("filename", "")) or "")
                pending = (status, text)
            elif mode in ("deactivate", "complete"):
                self.reply("success")
            else:
                self.reply(f"failure\n{MESSAGES['CC_BSC1_ERROR_UNKNOWN_COMMAND']}")
        if pending is not None:
            # The step took its time outside the lock: another session is not held up.
            if sim.faults.import_delay:
                time.sleep(sim.faults.import_delay)
            self.reply(pending[1], pending[0])


def main(argv: list[str] | None = None) -> None:
    """``python -m exchange.dev.bitrixsim --port N``: a 1C-Bitrix site's exchange in the
    foreground, for ``exchange check`` and ``exchange run``. The user and password:
    EXCHANGE_BITRIX_USER/_PASSWORD when set, else demo values."""
    from exchange.dev.httpsim import arguments, credential, run_in_foreground, setting_line

    parser = arguments(
        "python -m exchange.dev.bitrixsim",
        "Serve a simulated 1C-Bitrix exchange (catalog.import.1c) until Ctrl-C.",
    )
    parser.add_argument("--zip", action="store_true", help="answer init with zip=yes")
    args = parser.parse_args(argv)
    user, user_set = credential("EXCHANGE_BITRIX_USER", "exchange")
    password, password_set = credential("EXCHANGE_BITRIX_PASSWORD", "demo-password")
    sim = BitrixSimulator(user, password, zip=args.zip)
    sim.host, sim.port = args.host, args.port
    run_in_foreground(
        sim,
        "1C-Bitrix",
        lambda s: [
            setting_line("EXCHANGE_TARGET", "bitrix"),
            setting_line("EXCHANGE_BITRIX_URL", s.url + PATH),
            setting_line("EXCHANGE_BITRIX_USER", user, user_set),
            setting_line("EXCHANGE_BITRIX_PASSWORD", password, password_set),
            setting_line("EXCHANGE_BITRIX_CATALOG_ID", "demo-catalog"),
            setting_line("EXCHANGE_BITRIX_PRICE_TYPES", '{"retail": "Розничная"}'),
        ],
    )


if __name__ == "__main__":
    main()
