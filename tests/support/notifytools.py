"""The far ends of the operators' notifications, real and on loopback: an SMTP server (aiosmtpd)
that keeps what it receives, and a simulated Telegram Bot API (aiohttp) that answers
``getMe`` and ``sendMessage`` as Telegram does, errors and flood control (429) included."""

from __future__ import annotations

import email
import json
import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import Message
from typing import Any

from aiohttp import web
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from exchange.dev.httpsim import serve_app

SMTP_USER = "exchange"
SMTP_PASSWORD = "Smtp-Pa55-word"
BOT_TOKEN = "123456789:AAH-bot-s3cret-token_xyz"


class Inbox:
    """aiosmtpd's handler: every message accepted, parsed and kept."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.logins: list[str] = []

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        self.messages.append(email.message_from_bytes(bytes(envelope.content or b"")))
        return "250 Message accepted for delivery"

    def text(self, index: int = -1) -> str:
        part = self.messages[index]
        payload = part.get_payload(decode=True)
        assert isinstance(payload, bytes)
        return payload.decode(part.get_content_charset() or "utf-8")

    def subject(self, index: int = -1) -> str:
        header = self.messages[index]["Subject"]
        return str(email.header.make_header(email.header.decode_header(header)))


@contextmanager
def smtp_server(
    *, login: bool = False, tls: ssl.SSLContext | None = None, implicit_tls: bool = False
) -> Iterator[tuple[Inbox, int]]:
    """A real SMTP server on 127.0.0.1 (any free port); with ``login``, AUTH PLAIN is offered
    and only SMTP_USER / SMTP_PASSWORD pass (over plain text only without ``tls``). ``tls``:
    the server's certificate, offered by STARTTLS (required), or from the first byte with
    ``implicit_tls``."""
    inbox = Inbox()

    def authenticate(
        server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        ok = (
            isinstance(data, LoginPassword)
            and data.login.decode() == SMTP_USER
            and data.password.decode() == SMTP_PASSWORD
        )
        if ok:
            inbox.logins.append(SMTP_USER)
        return AuthResult(success=ok, handled=False)  # aiosmtpd answers 235 or 535

    options: dict[str, Any] = {"enable_SMTPUTF8": True}
    if login:
        # AUTH offered over plain text (loopback only). Not *required*: aiosmtpd warns about
        # that combination; the tests check ``logins`` instead.
        # PLAIN only: smtplib tries LOGIN after a refused PLAIN with an initial response that
        # aiosmtpd's LOGIN does not take, and the refusal would read as a timeout.
        options |= {
            "authenticator": authenticate,
            # aiosmtpd counts only STARTTLS as TLS; with implicit TLS the wire is TLS anyway.
            "auth_require_tls": tls is not None and not implicit_tls,
            "auth_exclude_mechanism": ["LOGIN"],
        }
    if tls is not None and not implicit_tls:
        options |= {"tls_context": tls, "require_starttls": True}
    if implicit_tls:
        options["ssl_context"] = tls
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port(), **options)
    controller.start()
    try:
        yield inbox, controller.port
    finally:
        controller.stop()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never says a word (an SMTP server that hangs)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield int(listener.getsockname()[1])
    finally:
        listener.close()


@dataclass
class BotApi:
    """The Bot API as Telegram answers it. ``answers``: what the next sendMessage calls get,
    one per call (``ok``, ``chat-not-found``, ``flood`` with retry_after 1, ``bad-token``);
    when they run out, ``ok``."""

    token: str = BOT_TOKEN
    answers: list[str] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        token, method = request.match_info["token"], request.match_info["method"]
        self.calls.append(method)
        if token != self.token:
            return _answer(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
        if method == "getMe":
            return _answer(
                200,
                {"ok": True, "result": {"id": 123456789, "is_bot": True, "username": "shop_bot"}},
            )
        if method != "sendMessage":
            return _answer(404, {"ok": False, "error_code": 404, "description": "Not Found"})
        body = await request.json()
        answer = self.answers.pop(0) if self.answers else "ok"
        if answer == "chat-not-found":
            return _answer(
                400, {"ok": False, "error_code": 400, "description": "Bad Request: chat not found"}
            )
        if answer == "flood":
            return _answer(
                429,
                {
                    "ok": False,
                    "error_code": 429,
                    "description": "Too Many Requests: retry after 1",
                    "parameters": {"retry_after": 1},
                },
            )
        self.sent.append(body)
        return _answer(
            200,
            {"ok": True, "result": {"message_id": len(self.sent), "text": body.get("text")}},
        )


def _answer(status: int, document: dict[str, Any]) -> web.Response:
    return web.Response(status=status, text=json.dumps(document), content_type="application/json")


@contextmanager
def bot_api(api: BotApi | None = None) -> Iterator[BotApi]:
    """The simulated Bot API on 127.0.0.1, in a thread of its own."""
    api = api or BotApi()
    app = web.Application()
    app.router.add_post("/bot{token}/{method}", api.handle)
    with serve_app(app) as url:
        api.url = url
        yield api
