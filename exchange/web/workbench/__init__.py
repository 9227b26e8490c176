"""The operators' workbench (contract 11): server-rendered pages at ``/`` of ``exchange serve``.

Jinja2 renders every page with autoescaping on for all templates, so a SKU, a payload or a
site's answer with markup, a formula or a script is shown as text; the pages carry no script
at all and a Content-Security-Policy of ``script-src 'none'`` says so to the browser, which
makes an injected script inert even if escaping were ever missed. Interaction is plain HTML
forms (a preview page before every action), so nothing is built or fetched at install.

Sessions are the signed cookies of ``keys.Signer`` (signed for the workbench only: they open
nothing else), each a row of ``operator_sessions`` read on every request with the operator's
role, so that signing out, a password set again or an operator removed ends it in every serve
process. Every POST carries a CSRF token, an HMAC of the session for that purpose; a viewer's
POST is refused 403. Sign-ins go through ``throttle``: judged before the password is verified,
which happens on threads of its own, never on those that reach the database; a browser that
signed in as that name before (its device cookie, ``signin``) has a lane of its own there, so
no stranger's flood of wrong guesses locks it out.
"""

from __future__ import annotations

from aiohttp import web

from exchange.web.workbench.actions import Actions
from exchange.web.workbench.core import ACTION_PATHS, Core, Who, _masked
from exchange.web.workbench.pages import Pages
from exchange.web.workbench.signin import SignIn
from exchange.words import WORDS


class Workbench(SignIn, Pages, Actions):
    """The pages and actions of contract 11, mounted by ``web.server`` at ``/``."""

    # -- routes --------------------------------------------------------------------------

    def routes(self) -> list[web.RouteDef]:
        """Every route behind ``Core._guarded`` (text a database can hold, or a 400)."""
        return [
            web.route(route.method, route.path, self._guarded(route.handler), **route.kwargs)
            for route in self._routes()
        ]

    def _routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self._page(self.dashboard)),
            web.get("/login", self.login_form),
            web.post("/login", self.login),
            web.post("/logout", self._action(self.logout, operator_only=False)),
            web.get("/quarantine", self._page(self.quarantine)),
            web.get("/messages/{state}", self._page(self.by_state)),
            web.get("/find", self._page(self.find)),
            web.get("/message/{message_id}", self._page(self.message)),
            web.get("/blocked", self._page(self.blocked)),
            web.get("/exchanges", self._page(self.exchanges)),
            web.get("/export", self._page(self.export)),
            web.post(ACTION_PATHS[0], self._action(self.preview)),
            web.post(ACTION_PATHS[1], self._action(self.confirm)),
            web.post("/action/prioritize", self._action(self.prioritize)),
            web.post("/action/release", self._action(self.release_withheld)),
            web.post("/delivery/pause", self._action(self.pause)),
            web.post("/delivery/resume", self._action(self.resume)),
            web.get("/static/workbench.css", self.css),
        ]


__all__ = ["ACTION_PATHS", "WORDS", "Core", "Who", "Workbench", "_masked"]
