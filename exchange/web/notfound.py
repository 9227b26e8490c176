"""An address ``serve`` does not know, said in the reader's language (issue 34 item 7).

aiohttp answers an unknown path «404: Not Found» and a known path with another method «405:
Method Not Allowed», in English; a person who mistyped an address reads what was not found and
where the workbench is in the workbench's language (``?lang=``, its cookie, else Russian, whatever
the browser's ``Accept-Language``; under ``/api/`` the intake's ``Accept-Language``). An answer a
handler made itself (the message page's 404) is left as it is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from exchange.i18n import Lang, _, lang_of_request
from exchange.web.workbench.core import LANG_COOKIE, page_lang

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_AIOHTTP_404 = "404: Not Found"
_AIOHTTP_405 = "405: Method Not Allowed"


def _lang(request: web.Request) -> Lang:
    """A page's language as the workbench chooses it (``?lang=``, its cookie, else Russian);
    under ``/api/`` (the JSON intake's programs) ``Accept-Language``, as its answers follow
    (contract 15)."""
    if request.path.startswith("/api/") and LANG_COOKIE not in request.cookies:
        return lang_of_request(request.headers.get("Accept-Language"))
    return page_lang(request)


@web.middleware
async def in_words(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPNotFound as exc:
        if exc.text != _AIOHTTP_404:
            raise
        lang = _lang(request)
        said = _("404: nothing here at {path}. The operators' workbench is at /", lang)
        raise web.HTTPNotFound(text=said.format(path=request.path) + "\n") from None
    except web.HTTPMethodNotAllowed as exc:
        if exc.text != _AIOHTTP_405:
            raise
        lang = _lang(request)
        said = _("405: {path} does not take {method}; it takes {allowed}", lang).format(
            path=request.path, method=request.method, allowed=", ".join(sorted(exc.allowed_methods))
        )
        raise web.HTTPMethodNotAllowed(
            request.method, exc.allowed_methods, text=said + "\n"
        ) from None
