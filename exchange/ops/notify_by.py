"""How a notification reaches the operators: e-mail (SMTP) or a Telegram bot.

Both are blocking and called in a thread (``asyncio.to_thread``), never on the event loop: one
short message per period does not need an asynchronous client.

- SMTP: the standard library's ``smtplib`` and ``email``, no dependency to add and keep; the
  server's certificate is verified (``ssl.create_default_context``), STARTTLS is required when
  chosen (a server that does not offer it fails, never falls back to plain text).
- Telegram: the Bot API's ``sendMessage`` through ``urllib.request``. The bot's token is part of
  the URL's path, and httpx logs every request's URL at INFO: urllib logs nothing, and every
  error is written here, in one line, from the status and the API's ``description``, with the
  token masked anyway.

Each failure is a ``MessengerError`` with one line that never holds a secret.
"""

from __future__ import annotations

import json
import smtplib
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Any, Protocol
from urllib.parse import urlsplit

from exchange.errors import ExchangeError
from exchange.secrets import mask_secrets, secret_forms
from exchange.settings import Settings

TELEGRAM_TEXT_MAX = 4096  # characters of one message (the Bot API's limit)
TELEGRAM_WAIT_MAX = 10.0  # seconds of a 429's retry_after waited once; longer: next period


class MessengerError(ExchangeError):
    """the notification could not be sent"""


class Messenger(Protocol):
    name: str

    def send(self, subject: str, text: str) -> None:
        """Deliver one message, or raise MessengerError."""

    def check(self) -> str:
        """Reach the service and sign in without sending anything: what was confirmed, or
        raise MessengerError."""


def _masked(text: str, secrets: list[str]) -> str:
    return mask_secrets(text, [form for secret in secrets for form in secret_forms(secret)])


@dataclass
class Smtp:
    host: str
    port: int
    security: str  # starttls, tls, none
    sender: str
    recipients: list[str]
    user: str | None
    password: Callable[[], str | None]
    timeout: float
    tls: Callable[[], ssl.SSLContext] = ssl.create_default_context
    name: str = "e-mail"

    def _connect(self) -> smtplib.SMTP:
        context = self.tls()
        try:
            smtp: smtplib.SMTP
            if self.security == "tls":
                smtp = smtplib.SMTP_SSL(self.host, self.port, timeout=self.timeout, context=context)
            else:
                smtp = smtplib.SMTP(self.host, self.port, timeout=self.timeout)
            try:
                if self.security == "starttls":
                    smtp.ehlo()
                    if not smtp.has_extn("starttls"):
                        raise MessengerError(
                            f"SMTP {self.host}:{self.port} does not offer STARTTLS: set "
                            "EXCHANGE_NOTIFY_SMTP_SECURITY=tls (port 465), or none for a "
                            "relay on this host"
                        )
                    smtp.starttls(context=context)
                if self.user:
                    smtp.login(self.user, self.password() or "")
            except BaseException:
                smtp.close()
                raise
        except MessengerError:
            raise
        except smtplib.SMTPAuthenticationError as exc:
            raise MessengerError(
                f"SMTP {self.host}:{self.port} refused the login of {self.user} ({exc.smtp_code})"
            ) from None
        except (smtplib.SMTPException, OSError, ssl.SSLError) as exc:
            raise MessengerError(self._why(exc)) from None
        return smtp

    def _why(self, exc: BaseException) -> str:
        what = str(exc) or type(exc).__name__
        # smtplib turns a timeout while reading an answer into "Connection unexpectedly
        # closed: timed out"; both say the same to a person.
        if isinstance(exc, socket.timeout | TimeoutError) or what.endswith("timed out"):
            what = f"no answer within {self.timeout:g} s"
        elif isinstance(exc, ConnectionRefusedError):
            what = "connection refused"
        text = f"SMTP {self.host}:{self.port} unreachable or failing: {what}"
        return _masked(" ".join(text.split()), [self.password() or ""])

    def send(self, subject: str, text: str) -> None:
        message = EmailMessage()
        message["Subject"] = subject
        message["From"] = self.sender
        message["To"] = ", ".join(self.recipients)
        message["Date"] = formatdate(localtime=False)
        message["Message-ID"] = make_msgid(domain=self.sender.rpartition("@")[2] or None)
        message.set_content(text)  # UTF-8: the Russian text travels as it is
        smtp = self._connect()
        try:
            smtp.send_message(message)
        except (smtplib.SMTPException, OSError) as exc:
            raise MessengerError(self._why(exc)) from None
        finally:
            try:
                smtp.quit()
            except (smtplib.SMTPException, OSError):
                smtp.close()

    def check(self) -> str:
        smtp = self._connect()
        try:
            smtp.noop()
        except (smtplib.SMTPException, OSError) as exc:
            raise MessengerError(self._why(exc)) from None
        finally:
            try:
                smtp.quit()
            except (smtplib.SMTPException, OSError):
                smtp.close()
        login = f", signed in as {self.user}" if self.user else ""
        return f"{self.host}:{self.port} ({self.security}){login}; to {', '.join(self.recipients)}"


@dataclass
class Telegram:
    api_url: str
    token: Callable[[], str | None]
    chat_id: str
    timeout: float
    name: str = "Telegram"
    sleep: Callable[[float], None] = time.sleep

    def _call(self, method: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        token = self.token() or ""
        host = urlsplit(self.api_url).netloc
        url = f"{self.api_url}/bot{token}/{method}"
        data = json.dumps(payload or {}, ensure_ascii=False).encode("utf-8")
        request = urllib.request.Request(
            url, data=data, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                body = answer.read()
        except urllib.error.HTTPError as exc:
            body = exc.read()
            status = exc.code
            exc.close()
            document = _json(body)
            retry_after = (document.get("parameters") or {}).get("retry_after")
            description = str(document.get("description") or exc.reason)
            raise _TelegramRefusal(status, description, retry_after) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            if isinstance(reason, socket.timeout | TimeoutError):
                reason = f"no answer within {self.timeout:g} s"
            raise MessengerError(
                _masked(f"Telegram Bot API at {host} unreachable: {reason}", [token])
            ) from None
        document = _json(body)
        if document.get("ok") is not True:
            raise _TelegramRefusal(200, str(document.get("description") or "not ok"), None)
        return document

    def _refused(self, refusal: _TelegramRefusal) -> MessengerError:
        host = urlsplit(self.api_url).netloc
        hint = ""
        if refusal.status == 401:
            hint = ": the bot's token is wrong (EXCHANGE_NOTIFY_TELEGRAM_TOKEN)"
        elif refusal.status in (400, 403):
            hint = ": check EXCHANGE_NOTIFY_TELEGRAM_CHAT_ID and that the bot is in that chat"
        text = f"Telegram Bot API at {host} refused: HTTP {refusal.status} {refusal.description}"
        return MessengerError(_masked(" ".join((text + hint).split()), [self.token() or ""]))

    def send(self, subject: str, text: str) -> None:
        body = f"{subject}\n\n{text}"
        if len(body) > TELEGRAM_TEXT_MAX:
            body = body[: TELEGRAM_TEXT_MAX - 1] + "…"
        payload = {"chat_id": self.chat_id, "text": body, "disable_web_page_preview": True}
        for attempt in (1, 2):
            try:
                self._call("sendMessage", payload)
                return
            except _TelegramRefusal as refusal:
                wait = _seconds(refusal.retry_after)
                if refusal.status == 429 and attempt == 1 and wait <= TELEGRAM_WAIT_MAX:
                    self.sleep(wait)  # the Bot API's own flood control: wait once as told
                    continue
                raise self._refused(refusal) from None

    def check(self) -> str:
        try:
            me = self._call("getMe").get("result") or {}
        except _TelegramRefusal as refusal:
            raise self._refused(refusal) from None
        return f"bot @{me.get('username', '?')} writes to chat {self.chat_id}"


class _TelegramRefusal(Exception):
    def __init__(self, status: int, description: str, retry_after: Any) -> None:
        super().__init__(status, description)
        self.status, self.description, self.retry_after = status, description, retry_after


def _json(body: bytes) -> dict[str, Any]:
    try:
        document = json.loads(body.decode("utf-8", "replace"))
    except ValueError:
        return {}
    return document if isinstance(document, dict) else {}


def _seconds(value: Any) -> float:
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return TELEGRAM_WAIT_MAX + 1  # unknown: do not wait, try again next period


def messengers(settings: Settings) -> list[Messenger]:
    """The configured ways (e-mail, Telegram); empty: notifications are off."""
    found: list[Messenger] = []
    if settings.notify_smtp_host:
        found.append(
            Smtp(
                host=settings.notify_smtp_host,
                port=settings.notify_smtp_port_in_use(),
                security=settings.notify_smtp_security,
                sender=settings.notify_smtp_from or "",
                recipients=list(settings.notify_smtp_to),
                user=settings.notify_smtp_user or None,
                password=lambda: settings.secret("notify_smtp_password"),
                timeout=settings.http_timeout,
                tls=settings.notify_smtp_tls,
            )
        )
    if settings.notify_telegram_token is not None or settings.notify_telegram_token_file:
        found.append(
            Telegram(
                api_url=settings.notify_telegram_api_url,
                token=lambda: settings.secret("notify_telegram_token"),
                chat_id=settings.notify_telegram_chat_id or "",
                timeout=settings.http_timeout,
            )
        )
    return found
