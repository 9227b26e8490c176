"""Signing in and out: the throttle first, argon2 on threads of its own, a session row."""

from __future__ import annotations

import asyncio
import secrets
from datetime import timedelta
from typing import Any

from aiohttp import web

from exchange.db.engine import transaction
from exchange.ops import operators
from exchange.ops.sign_ins import WORKBENCH as WORKBENCH_DOOR
from exchange.web.door import client_address
from exchange.web.keys import COOKIE_MAX_AGE_S, DEVICE_MAX_AGE_S
from exchange.web.throttle import Verdict
from exchange.web.workbench.core import (
    DEVICE_COOKIE,
    SESSION_COOKIE,
    Core,
    Who,
)


class SignIn(Core):
    # -- sign-in ---------------------------------------------------------------------------

    async def login_form(self, request: web.Request) -> web.StreamResponse:
        return self._render(request, "login.html", None, failed=False, wait=None)

    async def login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
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
            return self._render(request, "login.html", None, status=401, failed=True, wait=None)
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
        response = self._render(
            request,
            "login.html",
            None,
            status=429,
            failed=False,
            wait=verdict.retry_after_header,
        )
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
