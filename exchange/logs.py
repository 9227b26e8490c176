"""Log lines (issue 3 item 6): readable text by default, JSON lines for log collectors.

``configure`` installs one handler on the root logger; every record passes through
``RedactSecrets`` first, which replaces the site token and the database passwords wherever
they appear (message, arguments, structured fields, traceback). Outcome lines are written with
``log_event``: one line per message outcome, the fields named, never a payload.

    text  2026-08-23 07:20:00,123 INFO exchange.worker: delivery outcome=delivered
          message_id=price.SKU-17.v184.5c1f… kind=price aggregate=SKU-17 version=184 …
    json  {"timestamp": "2026-08-23T07:20:00.123Z", "level": "INFO", "logger":
           "exchange.worker", "event": "delivery", "outcome": "delivered", "message_id": …}
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
import zoneinfo
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from datetime import UTC, datetime, tzinfo
from types import MappingProxyType
from typing import Any, TextIO

from exchange.secrets import mask_secrets, secret_forms
from exchange.settings import Settings

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
REDACTED = "***"
# Where log_event leaves its structured form on the record, for the JSON formatter.
EVENT_ATTR = "exchange_event"
FIELDS_ATTR = "exchange_fields"
# Where ``BoundFields`` leaves the fields bound to the context a record was written in.
BOUND_ATTR = "exchange_bound"
# Fields every line written in this context carries (``bound``): a delivery loop binds its
# channel, so each line of it says which shop it is about (contract 13). A ContextVar: each
# asyncio task (a loop's drain, the tasks it starts) and each thread it hands work to
# (``asyncio.to_thread`` copies the context) sees its own, as structlog's contextvars do.
# An immutable empty default (a dict would be shared by every context that never set one).
_BOUND: ContextVar[Mapping[str, Any]] = ContextVar(
    "exchange_log_fields", default=MappingProxyType({})
)


@contextlib.contextmanager
def bound(**fields: Any) -> Iterator[None]:
    """Every line written inside the block (in this task or thread, and the tasks and threads
    it starts) carries ``fields``: ``k=v`` at the end of a text line, keys of a JSON line.
    Fields that are None are not bound."""
    wanted = {k: v for k, v in fields.items() if v is not None}
    if not wanted:
        yield
        return
    token = _BOUND.set({**_BOUND.get(), **wanted})
    try:
        yield
    finally:
        _BOUND.reset(token)


# Libraries that narrate every request or job at INFO: at INFO they would double the outcome
# lines (httpx) or add two lines per cycle (APScheduler). DEBUG shows them again.
CHATTY = ("httpx", "httpcore", "apscheduler")


def log_event(logger: logging.Logger, level: int, event: str, **fields: Any) -> None:
    """One structured line: ``event k=v …`` as text, ``{"event": event, **fields}`` as JSON.

    Fields that are None are left out of the text line; the JSON line keeps them as null, so
    every line of one event has the same keys.
    """
    if not logger.isEnabledFor(level):
        return
    text = " ".join([event, *(f"{k}={_text_value(v)}" for k, v in fields.items() if v is not None)])
    # "%s" with the text as an argument: a value holding "%" must not be read as a format.
    # ``fields`` is this call's own dict (keyword arguments): the record may keep it.
    logger.log(level, "%s", text, extra={EVENT_ATTR: event, FIELDS_ATTR: fields})


# What makes a value need quotes in a text line: whitespace (str.isspace's set), quotes, "=".
_NEEDS_QUOTES = re.compile(r"[\s\"'=]")
_QUOTE = json.JSONEncoder(ensure_ascii=False).encode


def _text_value(value: Any) -> str:
    if type(value) is int:  # most fields of an outcome line: nothing to quote
        return str(value)
    text = str(value)
    # Quoted only when needed, so that `grep outcome=quarantined` and logfmt parsers work.
    if not text or _NEEDS_QUOTES.search(text):
        return _QUOTE(text)
    return text


class JsonFormatter(logging.Formatter):
    """One JSON object per line: timestamp (UTC, ISO 8601), level, logger, event, fields."""

    def format(self, record: logging.LogRecord) -> str:
        event = getattr(record, EVENT_ATTR, None)
        document: dict[str, Any] = {
            "timestamp": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "event": event if event is not None else record.getMessage(),
        }
        fields = getattr(record, FIELDS_ATTR, None)
        if isinstance(fields, Mapping):
            document.update({k: v for k, v in fields.items() if k not in document})
        context = getattr(record, BOUND_ATTR, None)
        if context:
            document.update({k: v for k, v in context.items() if k not in document})
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            document["exception"] = record.exc_text
        if record.stack_info:
            document["stack"] = record.stack_info
        return json.dumps(document, ensure_ascii=False, default=str)


class RedactSecrets(logging.Filter):
    """Replaces secret values wherever they appear in a record, before any formatter runs.

    A safety net, not the first line of defence: the code never logs the token or a URL with
    its password on purpose, but a driver's error message or a site's answer might repeat one.
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        # Every spelling of every secret (repr, JSON, percent-encoded…), longest first: a
        # secret that contains another is replaced whole.
        forms = {form for secret in secrets if secret for form in secret_forms(secret)}
        self.secrets = sorted(forms, key=lambda f: (-len(f), f))

    def redact(self, text: str) -> str:
        return mask_secrets(text, self.secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # bad format arguments: keep what can be shown, redacted
            message = f"{record.msg!s} (arguments could not be formatted)"
        record.msg, record.args = self.redact(message), None
        if record.exc_info and not record.exc_text:
            # Formatted here, once, so that the traceback's text can be redacted too; the
            # formatters reuse exc_text instead of formatting the exception again.
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        fields = getattr(record, FIELDS_ATTR, None)
        if isinstance(fields, Mapping) and self._holds_secret(fields):
            setattr(
                record,
                FIELDS_ATTR,
                {k: self.redact(v) if isinstance(v, str) else v for k, v in fields.items()},
            )
        return True

    def _holds_secret(self, fields: Mapping[str, Any]) -> bool:
        """One search over the text fields together (most lines hold none): a secret inside
        one field is inside their join too."""
        joined = "\x00".join(v for v in fields.values() if isinstance(v, str))
        return any(secret in joined for secret in self.secrets)


def secrets_of(settings: Settings) -> list[str]:
    """The values that must never reach a log: the site token, the database passwords (in
    the URL's userinfo or its query). RedactSecrets hides each in every quoting."""
    return settings.secrets()


# The filter of the handler ``configure`` installed last: what the command line masks its own
# output with (errors, `check`), so that every output of a process hides the same secrets.
_installed: RedactSecrets | None = None


def redact(text: str) -> str:
    """``text`` with every secret of the configuration in force masked (see RedactSecrets)."""
    return text if _installed is None else _installed.redact(text)


class _Handler(logging.Handler):
    """Writes to the stream it was given, or to whatever ``sys.stderr`` is when a line is
    written (a stream captured at start-up may be closed by the time a late line comes)."""

    def __init__(self, stream: TextIO | None) -> None:
        super().__init__()
        self.stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = self.stream if self.stream is not None else sys.stderr
            stream.write(self.format(record) + "\n")
            stream.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)


def configure(settings: Settings, *, stream: TextIO | None = None) -> logging.Handler:
    """Install the service's log handler on the root logger (again: replaces the previous one).

    Returns the handler, so that a caller (a test) can remove it.
    """
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    handler = _Handler(stream)
    handler.setFormatter(JsonFormatter() if settings.log_format == "json" else _text_formatter())
    handler.addFilter(DriverNoiseOnOneLine())  # first: what it writes is redacted next
    handler.addFilter(BrokerConnectionLost())
    handler.addFilter(BoundFields())
    global _installed
    _installed = RedactSecrets(secrets_of(settings))
    handler.addFilter(_installed)
    root.addHandler(handler)
    # Neither format shows threads or processes: not collecting them for every record is the
    # optimisation the logging documentation names (one outcome line per message adds up).
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    # Nor where a call was made from (file, line, function): finding it walked the stack for
    # every record. The logging HOWTO's "Optimization" section names this switch.
    logging._srcfile = None
    level = logging.getLevelName(settings.log_level)
    root.setLevel(level)
    chatty_level = logging.NOTSET if level <= logging.DEBUG else logging.WARNING
    for name in CHATTY:
        logging.getLogger(name).setLevel(chatty_level)
    # Alembic narrates every connection at INFO; `migrate` says what it did itself.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    scheduler = logging.getLogger("apscheduler.scheduler")
    if not any(isinstance(f, _SkippedTick) for f in scheduler.filters):
        scheduler.addFilter(_SkippedTick())
    return handler


@contextlib.contextmanager
def unbound() -> Iterator[None]:
    """Lines written inside the block carry no bound field: what a loop does for every channel
    (the take-in it asks for between its batches) is no one channel's."""
    token = _BOUND.set(MappingProxyType({}))
    try:
        yield
    finally:
        _BOUND.reset(token)


class BoundFields(logging.Filter):
    """Stamps a record with the fields bound to the context it was written in (``bound``),
    for the formatters; a record that names a field itself keeps its own value."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _BOUND.get()
        if context:
            setattr(record, BOUND_ATTR, context)
        return True


class DriverNoiseOnOneLine(logging.Filter):
    """What the database pool and driver say about a connection they lost becomes one line.

    When PostgreSQL ends a connection (a restart, ``pg_terminate_backend``), SQLAlchemy's pool
    may fail to reset it on check-in and log "Exception during reset or similar" with a
    traceback, and psycopg logs a multi-line warning about its broken pipeline. Neither is a
    crash: the connection is discarded, the cycle's own one-line failure says what happened,
    and the next cycle reconnects. A traceback there would read like a bug to an operator.
    """

    LOGGERS = ("sqlalchemy", "psycopg")

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self.LOGGERS):
            return True
        message = " ".join(record.getMessage().split())
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            reason = " ".join(str(error).split()) or type(error).__name__
            message = f"{message}: {type(error).__name__}: {reason}"
        record.msg, record.args = message, None
        record.exc_info, record.exc_text = None, None
        return True


class BrokerConnectionLost(logging.Filter):
    """What the RabbitMQ client says about a connection it lost goes down to DEBUG, one line.

    When the broker or the network ends a connection, aiormq logs its reader's exit with the
    whole traceback ("Cancelling cause reader exited abnormally"), "Unexpected connection
    close from remote" at ERROR before the source hears of it, and "error when creating
    transport" at ERROR for each refused attempt to connect again. Neither is a fault of the
    service: the source writes its own line ("RabbitMQ: the connection was lost (...);
    reconnecting") and reconnects with a backoff. Only those records are lowered: anything
    else the client says (a consumer callback that failed, an unexpected frame) keeps its
    level and its traceback.
    """

    LOGGERS = ("aiormq", "aio_pika")
    CLOSED_BY_PEER = "Unexpected connection close from remote"

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= logging.DEBUG or not record.name.startswith(self.LOGGERS):
            return True
        error = record.exc_info[1] if record.exc_info else None
        named = [a for a in _arguments(record) if isinstance(a, BaseException)]
        if error is not None or named:
            if not connection_lost(error or named[0]):
                return True
        elif not record.getMessage().startswith(self.CLOSED_BY_PEER):
            return True
        message = " ".join(record.getMessage().split())
        if error is not None:
            message = f"{message}: {type(error).__name__}: {' '.join(str(error).split())}"
        record.msg, record.args = message, None
        record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def _arguments(record: logging.LogRecord) -> tuple[Any, ...]:
    args = record.args
    if isinstance(args, tuple):
        return args
    return () if args is None else (args,)


def connection_lost(error: BaseException) -> bool:
    """A connection ended under the client: the socket's errors, a read cut short, or the
    AMQP client's own connection error (read from ``sys.modules``: a process without the
    brokers extra never imports it, and then no such record can come)."""
    if isinstance(error, OSError | EOFError):  # EOFError: asyncio.IncompleteReadError
        return True
    amqp = sys.modules.get("aiormq.exceptions")
    closed = getattr(amqp, "AMQPConnectionError", None)
    return closed is not None and isinstance(error, closed)


class _SkippedTick(logging.Filter):
    """A cycle longer than the poll interval is normal (a big reload, a slow site): the tick
    that finds it still running is skipped by design, and APScheduler's warning about it on
    every tick would bury the one line that matters (a failed cycle)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "maximum number of running instances reached" not in record.getMessage()


class _ZonedFormatter(logging.Formatter):
    """Text lines stamped in UTC with its offset, whatever EXCHANGE_DISPLAY_TZ says (that is
    for people's pages and tables): logs of hosts in different zones, and a log shipper, read
    one clock."""

    def __init__(self, fmt: str, tz: tzinfo) -> None:
        super().__init__(fmt)
        self._tz = tz

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return datetime.fromtimestamp(record.created, self._tz).isoformat(
            sep=" ", timespec="milliseconds"
        )

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        context = getattr(record, BOUND_ATTR, None)
        if not context:
            return text
        fields = getattr(record, FIELDS_ATTR, None) or {}
        said = " ".join(f"{k}={_text_value(v)}" for k, v in context.items() if k not in fields)
        if not said:
            return text
        # After the first line: a traceback below it stays as Python wrote it.
        first, newline, rest = text.partition("\n")
        return f"{first} {said}{newline}{rest}"


def _text_formatter(display_tz: str = "UTC") -> logging.Formatter:
    return _ZonedFormatter(TEXT_FORMAT, zoneinfo.ZoneInfo(display_tz))
