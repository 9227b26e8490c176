"""Signing in and out: the throttle first, argon2 on threads of its own, a session row."""

from __future__ import annotations

import asyncio
import hmac
import re
import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from exchange.db.engine import transaction
from exchange.ops import operators
from exchange.ops.sign_ins import WORKBENCH as WORKBENCH_DOOR
from exchange.web.door import client_address
from exchange.web.keys import COOKIE_MAX_AGE_S, DEVICE_MAX_AGE_S
from exchange.web.throttle import Verdict
from exchange.web.workbench.core import (
    DEVICE_COOKIE,
    LOGIN_COOKIE,
    SESSION_COOKIE,
    Core,
    Who,
)

# The sign-in cookie's value: what ``secrets.token_urlsafe(24)`` makes.
_LOGIN_VALUE = re.compile(r"[A-Za-z0-9_-]{32}")


class SignIn(Core):
    # -- sign-in ---------------------------------------------------------------------------

    async def login_form(self, request: web.Request) -> web.StreamResponse:
        return self._login_page(request)

    def _login_page(
        self,
        request: web.Request,
        status: int = 200,
        *,
        failed: bool = False,
        wait: str | None = None,
        forged: bool = False,
    ) -> web.Response:
        """The sign-in form, with the CSRF token of this browser's sign-in cookie (set here,
        kept if it holds one): a sign-in has no session yet, so its token is bound to that
        cookie, as every other form's is bound to the session (``Core.csrf``)."""
        value = request.cookies.get(LOGIN_COOKIE, "")
        if not _LOGIN_VALUE.fullmatch(value):
            value = secrets.token_urlsafe(24)
        response = self._render(
            request,
            "login.html",
            None,
            status=status,
            failed=failed,
            wait=wait,
            forged=forged,
            login_csrf=self._login_tag(value),
        )
        response.set_cookie(
            LOGIN_COOKIE,
            value,
            httponly=True,
            samesite="Strict",  # never sent with a form posted from another site
            secure=self._secure_cookies(request),
            path="/login",
        )
        return response

    def _login_tag(self, value: str) -> str:
        return self._csrf.tag(f"login|{value}")

    def _login_posted_here(self, request: web.Request, form: Any) -> bool:
        """Whether a sign-in was posted by this site's own form (issue 33 item 7: a page
        elsewhere could sign an operator's browser into its author's account): the token of
        this browser's sign-in cookie, and the Origin (else the Referer) naming this site
        where the browser sent one."""
        value = request.cookies.get(LOGIN_COOKIE, "")
        token = str(form.get("csrf", ""))
        if not _LOGIN_VALUE.fullmatch(value) or not hmac.compare_digest(
            token.encode(), self._login_tag(value).encode()
        ):
            return False
        origin = request.headers.get("Origin")
        sender = origin if origin is not None else request.headers.get("Referer")
        if not sender:
            return True  # neither sent (an old browser, a privacy setting): the token holds
        hosts = {request.host.lower()}
        if self.config.public_url:
            hosts.add(urlsplit(self.config.public_url).netloc.lower())
        return urlsplit(sender).netloc.lower() in hosts  # Origin «null»: no host, refused

    async def login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        if not self._login_posted_here(request, form):
            # Nothing judged or counted: a fresh form, whose sign-in works at once.
            return self._login_page(request, 403, forged=True)
        name = str(form.get("name", "")).strip()[:100]
        password = str(form.get("password", ""))[:1000]
        address = client_address(request, self.config.behind_proxy)
        device = self._device(request, name)
        verdict = self.throttle.admit(name, address, device=device)
        if not verdict.allowed:
            await self.sign_ins.refused(WORKBENCH_DOOR)
            return self._too_many(request, verdict)
        token = secrets.token_urlsafe(32)
        failed: bool | None = None  # None: not judged (the database failed), nothing counted
        try:
            found = await asyncio.to_thread(self._credentials, name)
            right = await asyncio.get_running_loop().run_in_executor(
                self._argon2 if device is None else self._argon2_devices,
                operators.verify,
                found,
                password,
            )
            opened = False
            if right and found is not None:
                opened = await asyncio.to_thread(self._open, name, found, token)
            failed = not opened
        finally:
            wait = self.throttle.done(name, address, failed=failed, device=device)
        if failed is not None:
            await self.sign_ins.judged(WORKBENCH_DOOR, right=not failed)
        if failed:
            await asyncio.sleep(wait)
            return self._login_page(request, 401, failed=True)
        response = web.HTTPSeeOther("/")
        secure = self._secure_cookies(request)
        response.set_cookie(
            SESSION_COOKIE,
            self.signer.sign(token),
            httponly=True,
            samesite="Strict",
            secure=secure,
            path="/",
        )
        # The device cookie (OWASP's, against lockout): this browser signed in as ``name``;
        # its next sign-in as ``name`` has a lane of its own in the throttle. Nothing secret in
        # it, and it grants nothing else: a password is still verified.
        response.set_cookie(
            DEVICE_COOKIE,
            self._devices.sign(_device_value(device or secrets.token_hex(16), name)),
            max_age=DEVICE_MAX_AGE_S,
            httponly=True,
            samesite="Strict",
            secure=secure,
            path="/login",
        )
        raise response

    def _device(self, request: web.Request, name: str) -> str | None:
        """The device a valid device cookie names, if it was set for ``name``; else None
        (none, forged, expired, another purpose's signature or another name's)."""
        value = request.cookies.get(DEVICE_COOKIE)
        signed = self._devices.verify(value) if value else None
        if signed is None:
            return None
        device, _, named = signed.partition("-")
        try:
            owner = bytes.fromhex(named).decode("utf-8")
        except ValueError:
            return None
        return device if device and owner == name else None

    def _credentials(self, name: str) -> operators.Credentials | None:
        with transaction(self.engine, read_only=True) as connection:
            return operators.credentials(connection, name)

    def _open(self, name: str, found: operators.Credentials, token: str) -> bool:
        with transaction(self.engine) as connection:
            return operators.open_session(
                connection,
                name,
                found,
                token,
                self.clock.now(),
                timedelta(seconds=COOKIE_MAX_AGE_S),
            )

    def _too_many(self, request: web.Request, verdict: Verdict) -> web.Response:
        response = self._login_page(request, 429, wait=verdict.retry_after_header)
        response.headers["Retry-After"] = verdict.retry_after_header
        return response

    async def logout(self, request: web.Request, who: Who, form: Any) -> web.StreamResponse:
        def end() -> None:
            with transaction(self.engine) as connection:
                operators.end_session(connection, who.session)

        await asyncio.to_thread(end)
        response = web.HTTPSeeOther("/login")
        response.del_cookie(SESSION_COOKIE, path="/")
        raise response


def _device_value(device: str, name: str) -> str:
    """What a device cookie signs: the device's random id and the name, as hex (no «.», the
    signature's separator, and no «-», theirs)."""
    return f"{device}-{name.encode('utf-8').hex()}"
