"""1C's standard exchange (contract 9a): the server half of the 1C-Bitrix protocol.

``/1c_exchange.php`` and ``/bitrix/admin/1c_exchange.php``, ``type=catalog`` with every mode
and a harmless ``type=sale``. Answers are plain text whose first line is exactly ``success``,
``progress`` or ``failure`` (ASCII); a refusal is ``failure`` and a line 1C shows its user,
and, once signed in, an entry in ``cml_exchanges`` that operators see. A request without a
session (a wrong password, no cookie, the exchange closed) changes nothing in the database:
anyone can send one, hundreds a second, with text of their choosing; it is counted in memory
(``OneCExchange.refused``) and logged at most once a minute. Each checkauth opens an exchange with a
folder of its own, so two 1C nodes exchanging at once never mix their files.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import logging
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qsl

from aiohttp import web
from sqlalchemy import Engine

from exchange.domain.clock import Clock, SystemClock
from exchange.failpoints import failpoint
from exchange.intake.commerceml.publish import (
    SESSION_NAMES,
    Outcome,
    ReaderPool,
    close_interrupted,
    exchange_finished,
    exchange_refused,
    exchange_started,
    exchanges_alive,
    import_file,
)
from exchange.ops.sign_ins import ONEC as ONEC_DOOR
from exchange.web.config import WebConfig
from exchange.web.door import client_address
from exchange.web.files import (
    SESSION,
    FileRefused,
    Spelling,
    inside,
    is_archive,
    is_xml,
    safe_relative,
    spelling,
    start_afresh,
    sweep,
    unpack_archives,
    unpacked,
)
from exchange.web.keys import Signer, credentials_digest, same_secret
from exchange.web.sign_ins import SignIns
from exchange.web.throttle import Guesses
from exchange.words import onec_words

log = logging.getLogger(__name__)

COOKIE = "EXCHANGE_1C_SESSION"
PATHS = ("/1c_exchange.php", "/bitrix/admin/1c_exchange.php")
TEXT = "text/plain"
_BASIC_SESSION = "0" * 32  # Basic on every request, no cookie, no sessid: one shared folder
ANONYMOUS = "-"  # the session of a request refused before it has one
REFUSALS_LOGGED_EVERY_S = 60.0


def _answer(first: str, *lines: str) -> web.Response:
    """1C-Bitrix's answer (contract 9a): an ASCII first line, then text in windows-1251 with
    that charset named; a character windows-1251 lacks (a name 1C itself never sends) is a
    ``?``, never a failed answer. catalog.import.1c/component.php ends the same way: its
    output converted to windows-1251 and ``Content-Type: text/html; charset=windows-1251``;
    we name ``text/plain``, so that a file name said back is never markup in a browser (1C
    reads the charset, not the type)."""
    body = "\n".join((first, *(_ascii_safe(line) for line in lines))) + "\n"
    return web.Response(
        body=body.encode("cp1251", "replace"), content_type=TEXT, charset="windows-1251"
    )


def _say(first: str, text: str) -> web.Response:
    """An answer whose line after ``first`` is for 1C's administrator: in Russian."""
    return _answer(first, onec_words(text))


def _ascii_safe(line: str) -> str:
    return line.replace("\r", " ").replace("\n", " ")


def _query(request: web.Request) -> dict[str, str]:
    # 1C appends "?type=…" even to an address that already has a query: "…?a=b?type=catalog".
    raw = request.query_string.replace("?", "&")
    return dict(parse_qsl(raw, keep_blank_values=True))


@dataclass
class Job:
    task: asyncio.Task[Outcome] | None = None
    read: int = 0
    offers: int = 0
    size: int = 0
    entry: int | None = None  # its cml_exchanges row while the import runs


# A serve process renews its imports' heartbeats this often; an unfinished entry silent for
# four of them was left by a process that died (cml_exchanges.heartbeat_at).
HEARTBEAT_EVERY_S = 30.0
SILENT_AFTER_S = 4 * HEARTBEAT_EVERY_S


@dataclass
class Exchanges:
    """The state of the exchanges in flight: their import jobs, by session and the file the
    name means in that session's folder (``OneCExchange._job_key``): ``./offers.xml``,
    ``offers.xml`` and, where the file system takes them as one, ``OFFERS.XML`` or
    ``offers.xml.`` are one file and have one job."""

    jobs: dict[tuple[str, str], Job] = field(default_factory=dict)


@dataclass
class Refusals:
    """Requests refused without a session since serve started, kept in memory only (a flood
    of them never grows the database): ``app[ONEC].refused`` (``exchange/web/server.py``).
    Logged at most once every ``log_every`` seconds, with how many came since the last line.
    Wrong passwords among them also reach ``status`` and the workbench as a summary a minute
    (``web/sign_ins.py``, contract 15)."""

    since: datetime = field(default_factory=lambda: datetime.now(UTC))  # serve's start
    count: int = 0
    last_at: datetime | None = None
    last_reason: str = ""
    log_every: float = REFUSALS_LOGGED_EVERY_S
    clock: Clock = field(default_factory=SystemClock, repr=False)
    monotonic: Callable[[], float] = field(default=time.monotonic, repr=False)
    _logged_at: float | None = None
    _unlogged: int = 0

    def add(self, reason: str) -> None:
        self.count += 1
        self._unlogged += 1
        self.last_at = self.clock.now()
        self.last_reason = reason
        now = self.monotonic()
        if self._logged_at is None or now - self._logged_at >= self.log_every:
            log.warning(
                "1C exchange: %d request(s) refused without a session since the last such "
                "line (%d since serve started); the latest: %s",
                self._unlogged,
                self.count,
                reason,
            )
            self._logged_at, self._unlogged = now, 0


class OneCExchange:
    def __init__(
        self,
        config: WebConfig,
        engine: Engine,
        key: str,
        staging_engine: Engine | None = None,
    ) -> None:
        """``key``: the HTTP signing key (``keys.stored_key`` or EXCHANGE_HTTP_SECRET_KEY)."""
        self.config = config
        self.engine = engine
        self.staging_engine = staging_engine  # staging_intents in a database of its own
        processes = config.reader_processes
        self.readers = ReaderPool(processes) if processes > 0 else None
        # A 1C session (its cookie and its sessid) holds only for the 1C user and password
        # that opened it: a new one of either (a leaked password rotated) ends every session
        # of the old, in every serve process, as a workbench password change ends the name's.
        self.signer = Signer(
            key,
            "1c-session",
            config.clock,
            bound_to=credentials_digest(config.onec_user or "", config.onec_password or ""),
        )
        self.state = Exchanges()
        self.root = config.exchange_dir
        self.refused = Refusals(
            since=config.clock.now(), clock=config.clock, monotonic=config.monotonic
        )
        self.guesses = Guesses("1c", config.monotonic)
        # Refused sign-ins as a summary a minute (contract 15); ``server.build_app`` gives
        # every way in of one serve process the same one, and flushes it.
        self.sign_ins = SignIns(engine, config.clock, config.monotonic)
        self._spelling: Spelling | None = None  # the exchanges' file system's, asked once

    def routes(self) -> list[web.RouteDef]:
        return [web.route("*", path, self.handle) for path in PATHS]

    def start(self) -> None:
        """Starts the reading processes when the exchange is open (serve's start)."""
        if self.readers is not None and self.config.onec_open:
            self.readers.start()

    def close(self) -> None:
        """Stops the reading processes (serve's shutdown)."""
        if self.readers is not None:
            self.readers.close()

    async def watch(
        self, every: float = HEARTBEAT_EVERY_S, silent_after: float = SILENT_AFTER_S
    ) -> None:
        """While serve runs: renew the heartbeat of this process's imports in flight, and close
        as ``interrupted`` the entries another (dead) process left unfinished."""
        while True:
            await asyncio.to_thread(self.beat, self.config.clock.now(), silent_after)
            await asyncio.sleep(every)

    def beat(self, now: datetime, silent_after: float) -> None:
        running = [
            job.entry
            for job in list(self.state.jobs.values())
            if job.entry is not None and job.task is not None and not job.task.done()
        ]
        try:
            exchanges_alive(self.engine, running, now)
            closed = close_interrupted(self.engine, now, silent_after)
        except Exception as exc:  # the database is down: the next beat tries again
            log.warning("1C imports' heartbeat not written: %s", exc)
            return
        if closed:
            log.warning(
                "%d 1C import(s) left unfinished by a serve process that stopped: "
                "closed as interrupted (1C sends the file again)",
                closed,
            )

    # -- the entry -------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        query = _query(request)
        kind, mode = query.get("type", ""), query.get("mode", "")
        if not self.config.onec_open:
            return await self._refuse(
                ANONYMOUS,
                "",
                "the 1C exchange is closed: EXCHANGE_1C_USER and EXCHANGE_1C_PASSWORD are not "
                "set on the service",
            )
        if kind not in ("catalog", "sale"):
            return await self._refuse(ANONYMOUS, "", f"unknown exchange type {kind[:40]!r}")
        basic = await self._basic(request)
        if isinstance(basic, web.Response):
            return basic
        if mode == "checkauth":
            return await self._checkauth(basic)
        session = self._session(request, query, basic)
        if session is None:
            return await self._refuse(
                ANONYMOUS, "", "not authorized: wrong user or password, or no session (checkauth)"
            )
        if kind == "sale":
            return await self._sale(request, mode)
        if mode == "init":
            return await self._init(session)
        if mode == "file":
            return await self._file(request, session, query.get("filename", ""))
        if mode == "import":
            return await self._import(session, query.get("filename", ""))
        if mode == "deactivate":
            # Prices only: nothing here is deactivated (a partial load must never hide goods).
            return _say("success", "nothing to deactivate: prices only")
        if mode == "complete":
            return await self._complete(session)
        return await self._refuse(session, "", f"unknown mode {mode[:40]!r}")

    async def _refuse(self, session: str, filename: str, reason: str) -> web.Response:
        if session == ANONYMOUS:
            self.refused.add(reason)
            return _say("failure", reason)
        log.warning("1C exchange refused: %s", reason)
        try:
            await asyncio.to_thread(exchange_refused, self.engine, session, filename, reason)
        except Exception as exc:  # the answer to 1C matters more than the entry
            log.error("1C exchange: the refusal could not be recorded: %s", exc)
        return _say("failure", reason)

    # -- authentication ----------------------------------------------------------------------

    def _basic_ok(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        if not header.lower().startswith("basic "):
            return False
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
        except ValueError:  # not base64 (bytes that are not ASCII among them), not UTF-8
            return False
        user, _, password = decoded.partition(":")
        expected_user = self.config.onec_user or ""
        expected_password = self.config.onec_password or ""
        user_ok = same_secret(user, expected_user)
        password_ok = same_secret(password, expected_password)
        return user_ok and password_ok

    async def _basic(self, request: web.Request) -> bool | web.Response:
        """Whether the request carries 1C's user and password (HTTP Basic); a refusal, before
        they are checked, while its address waits after wrong ones (``Guesses``)."""
        if not request.headers.get("Authorization", "").lower().startswith("basic "):
            return False
        address = client_address(request, self.config.behind_proxy)
        verdict = self.guesses.admit(address)
        if not verdict.allowed:
            await self.sign_ins.refused(ONEC_DOOR)
            return await self._refuse(
                ANONYMOUS,
                "",
                "too many wrong passwords from this address: "
                f"try again in {verdict.retry_after_header} s",
            )
        right, hold = self.guesses.judge(address, lambda: self._basic_ok(request))
        await self.sign_ins.judged(ONEC_DOOR, right=right)
        if hold > 0:
            await asyncio.sleep(hold)
        return right

    def _session(self, request: web.Request, query: dict[str, str], basic: bool) -> str | None:
        """The exchange a request belongs to: only one that ``checkauth`` issued (its signed
        cookie, or its ``sessid`` with Basic), or the shared one of Basic without a sessid."""
        sessid = query.get("sessid")
        cookie = request.cookies.get(COOKIE)
        if cookie:
            session = self.signer.verify(cookie)
            if session is not None and self._issued(session) and sessid in (None, session):
                return session
        if basic:
            if sessid is None:
                return _BASIC_SESSION
            # Never a folder the request names: another node's, or one the sweep does not know.
            return sessid if self._issued(sessid) else None
        return None

    def _issued(self, session: str) -> bool:
        """Whether ``checkauth`` issued ``session``: its second half proves the first."""
        if not SESSION.match(session):
            return False
        half = len(session) // 2
        return hmac.compare_digest(session[half:], self._sessid_tag(session[:half]))

    def _new_session(self) -> str:
        half = secrets.token_hex(8)
        return half + self._sessid_tag(half)

    def _sessid_tag(self, half: str) -> str:
        # "sessid|…" never has the form of a signed cookie ("session.stamp"): no overlap.
        return self.signer.tag(f"sessid|{half}")[: len(half)]

    async def _checkauth(self, basic: bool) -> web.Response:
        if not basic:
            return await self._refuse("-", "", "wrong user or password (HTTP Basic)")
        session = self._new_session()
        now = self.config.clock.now()
        await asyncio.to_thread(sweep, self.root, self.config.keep_seconds, now.timestamp())
        cookie = self.signer.sign(session)
        return _answer(
            "success", COOKIE, cookie, f"sessid={session}", f"timestamp={int(now.timestamp())}"
        )

    # -- catalog ---------------------------------------------------------------------------

    def _folder(self, session: str) -> Path:
        return self.root / session

    def _job_key(self, session: str, filename: str) -> tuple[str, str]:
        """The job of ``filename`` in ``session``: one for every name of the same file in that
        session's folder (FileRefused for a name the folder does not take)."""
        relative = safe_relative(filename)
        if self._spelling is None:
            self.root.mkdir(parents=True, exist_ok=True)
            self._spelling = spelling(self.root)
        return session, self._spelling.key(relative)

    def _running(self, session: str) -> bool:
        return any(
            key[0] == session and job.task is not None and not job.task.done()
            for key, job in self.state.jobs.items()
        )

    def _forget(self, session: str) -> None:
        for key in [key for key in self.state.jobs if key[0] == session]:
            del self.state.jobs[key]

    async def _init(self, session: str) -> web.Response:
        folder = self._folder(session)
        if not self._running(session):
            self._forget(session)
            await asyncio.to_thread(shutil.rmtree, folder, True)
        await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
        return _answer(
            "zip=yes" if self.config.zip else "zip=no", f"file_limit={self.config.file_limit}"
        )

    async def _file(self, request: web.Request, session: str, filename: str) -> web.Response:
        folder = self._folder(session)
        try:
            await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
            target = inside(folder, filename)
            named = await asyncio.to_thread(self._job_key, session, filename)
        except FileRefused as exc:
            return await self._refuse(session, filename, str(exc))
        if is_archive(filename):
            # A new archive may carry new files under names already imported: answers kept
            # for those belong to the old files.
            for key in [k for k, job in self.state.jobs.items() if k[0] == session]:
                job = self.state.jobs[key]
                if job.task is not None and job.task.done():
                    del self.state.jobs[key]
        done = self.state.jobs.get(named)
        if done is not None:
            if done.task is not None and not done.task.done():
                return await self._refuse(
                    session, filename, f"{filename[:100]!r} is being imported: send it later"
                )
            # Imported already: what arrives now is a new file of that name, not more of it.
            del self.state.jobs[named]
            await asyncio.to_thread(start_afresh, folder, target)
        elif is_archive(filename) and await asyncio.to_thread(unpacked, target):
            # Unpacked already (by the import of another file): a new archive of that name,
            # not more of the old one (whose chunks all came before it was unpacked).
            await asyncio.to_thread(start_afresh, folder, target)
        expected = request.content_length
        part = target.with_name(target.name + ".part")
        limit = self.config.max_file_bytes
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            already = target.stat().st_size if target.exists() else 0
            received = 0
            with part.open("wb") as out:
                async for block in request.content.iter_chunked(1 << 16):
                    received += len(block)
                    if received > self.config.file_limit:  # a chunked part (Content-Length: 413)
                        raise FileRefused(
                            f"a part of {filename[:100]!r} is larger than file_limit="
                            f"{self.config.file_limit} bytes (init announced it)"
                        )
                    if already + received > limit:
                        raise FileRefused(f"file {filename[:100]!r} is larger than {limit} bytes")
                    out.write(block)
            if expected is not None and received != expected:
                raise FileRefused(
                    f"upload of {filename[:100]!r} was cut short: {received} of {expected} bytes"
                )
            await asyncio.to_thread(_append, part, target)
        except FileRefused as exc:
            part.unlink(missing_ok=True)
            if "larger than" in str(exc):
                target.unlink(missing_ok=True)
            return await self._refuse(session, filename, str(exc))
        except (OSError, asyncio.CancelledError, ConnectionError) as exc:
            part.unlink(missing_ok=True)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return await self._refuse(session, filename, f"upload of {filename[:100]!r} failed")
        return _say("success", f"{received} bytes of {filename[:100]} received")

    async def _import(self, session: str, filename: str) -> web.Response:
        folder = self._folder(session)
        try:
            key = await asyncio.to_thread(self._job_key, session, filename)
        except FileRefused as exc:
            return await self._refuse(session, filename, str(exc))
        job = self.state.jobs.get(key)
        if job is None:
            try:
                target = inside(folder, filename)
            except FileRefused as exc:
                return await self._refuse(session, filename, str(exc))
            job = Job()
            job.task = asyncio.create_task(self._run(job, session, folder, target, filename))
            self.state.jobs[key] = job
        assert job.task is not None
        try:
            outcome = await asyncio.wait_for(asyncio.shield(job.task), self.config.progress_wait)
        except TimeoutError:
            return _say("progress", f"reading {filename[:100]}: {job.offers} offers so far")
        # The finished job stays until this exchange sends the file again, inits or completes:
        # an import repeated (an answer lost on the way) gets the same answer.
        said = f"{filename[:100]}: {onec_words(outcome.detail)}"
        return _answer("failure" if outcome.outcome == "failure" else "success", said)

    async def _run(
        self, job: Job, session: str, folder: Path, target: Path, filename: str
    ) -> Outcome:
        def progress(read: int, offers: int) -> None:
            job.read, job.offers = read, offers

        def work() -> Outcome:
            try:
                row_id = exchange_started(self.engine, session, filename)
            except Exception as exc:  # the database is down: 1C tries again later
                log.error("1C import of %s not started: %s", filename, exc)
                return Outcome("failure", f"the service's database is unavailable: {exc}")
            job.entry = row_id
            failpoint("import-started")
            try:
                outcome = self._work(folder, target, filename, progress, session)
            except Exception as exc:  # recorded for operators, then answered as failure
                log.exception("1C import of %s failed", filename)
                outcome = Outcome("failure", f"internal error: {type(exc).__name__}: {exc}")
            try:
                exchange_finished(self.engine, row_id, outcome)
            except Exception as exc:
                log.error("1C import of %s: the outcome could not be recorded: %s", filename, exc)
            return outcome

        return await asyncio.to_thread(work)

    def _work(
        self,
        folder: Path,
        target: Path,
        filename: str,
        progress: Callable[[int, int], None],
        session: str,
    ) -> Outcome:
        try:
            unpack_archives(
                folder, max_bytes=self.config.max_file_bytes, max_ratio=self.config.max_zip_ratio
            )
        except FileRefused as exc:
            return Outcome("failure", str(exc))
        if is_archive(target):
            return Outcome("nothing", "archive unpacked")
        if not is_xml(target):  # images and the like: never unpacked nor read
            return Outcome("nothing", "not an XML file: accepted and dropped")
        if not target.is_file():
            return Outcome("failure", f"file {filename[:100]!r} was not uploaded in this exchange")
        return import_file(
            self.engine,
            target,
            name=filename,
            price_types=self.config.price_types,
            sku_mode=self.config.sku_mode,
            progress=progress,
            staging_engine=self.staging_engine,
            pool=self.readers,
            session_names=folder / SESSION_NAMES,
            exchange=session,
        )

    async def _complete(self, session: str) -> web.Response:
        running = [
            job.task
            for key, job in self.state.jobs.items()
            if key[0] == session and job.task is not None
        ]
        if running:
            await asyncio.wait(running)
        self._forget(session)
        await asyncio.to_thread(shutil.rmtree, self._folder(session), True)
        return _say("success", "exchange complete")

    # -- sale: answered so that 1C finishes its exchange -------------------------------------

    async def _sale(self, request: web.Request, mode: str) -> web.StreamResponse:
        if mode == "init":
            return _answer("zip=no", f"file_limit={self.config.file_limit}")
        if mode == "query":
            stamp = self.config.clock.now().strftime("%Y-%m-%dT%H:%M:%S")
            xml = (
                '<?xml version="1.0" encoding="windows-1251"?>\n'
                f'<КоммерческаяИнформация ВерсияСхемы="2.05" ДатаФормирования="{stamp}"/>\n'
            )
            return web.Response(
                body=xml.encode("cp1251"),
                content_type="application/xml",
                charset="windows-1251",
            )
        if mode == "file":
            # Orders are not this service's business: accepted and dropped, read no further
            # than the file_limit init announced (the door answers 413 to a Content-Length
            # above it before a byte is read; a chunked body is cut here the same way).
            received = 0
            async for block in request.content.iter_chunked(1 << 16):
                received += len(block)
                if received > self.config.file_limit:
                    raise web.HTTPRequestEntityTooLarge(
                        max_size=self.config.file_limit,
                        actual_size=received,
                        headers={"Connection": "close"},
                    )
            return _say("success", "orders are not imported by this service")
        if mode in ("success", "import", "info", "deactivate", "complete"):
            return _say("success", "no orders here")
        return _say("failure", f"unknown mode {mode[:40]!r}")


def _append(part: Path, target: Path) -> None:
    with target.open("ab") as out, part.open("rb") as source:
        shutil.copyfileobj(source, out, 1 << 20)
    part.unlink()
