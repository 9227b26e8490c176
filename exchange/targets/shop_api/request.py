"""One request to the site as both wires of the client give it: the ``Response`` (or a
``TransportFailure``), how far a request cut off by its deadline got (``Progress``), and the
``Wire`` both implement (``wire_aiohttp``, ``wire_httpx``)."""

from __future__ import annotations

from dataclasses import dataclass

from exchange.targets.wire import TransportFailure


# Not frozen: one is made per message, and a frozen dataclass's __init__ costs ~2.5x.
@dataclass(slots=True)
class Response:
    status: int
    body: bytes
    retry_after: str | None = None
    body_error: str | None = None  # the body could not be read (cut off, bad encoding)


SiteResult = Response | TransportFailure


class Progress:
    """How far one request got, for the failure of a request its deadline cut off: waiting for
    a free connection or before its headers went out, nothing can have reached the site;
    after, the result is unknown (a write still going: WriteTimeout; else ReadTimeout)."""

    __slots__ = ("answered", "queued", "sent", "written")

    def __init__(self, sent: bool = False) -> None:
        self.queued = False
        self.sent = sent
        self.written = True  # False while a streamed body is still going out
        self.answered = False

    def cut_off(self, timeout: float) -> TransportFailure:
        if self.queued:
            return TransportFailure(
                "PoolTimeout",
                f"no free connection within {timeout:g} s (EXCHANGE_HTTP_TIMEOUT)",
                maybe_sent=False,
            )
        if not self.sent:
            return TransportFailure(
                "ConnectTimeout",
                f"no connection to the site within {timeout:g} s (EXCHANGE_HTTP_TIMEOUT)",
                maybe_sent=False,
            )
        if not self.written:
            return TransportFailure(
                "WriteTimeout",
                f"the request could not be sent whole within {timeout:g} s "
                "(EXCHANGE_HTTP_TIMEOUT): the site stopped reading it",
                maybe_sent=True,
            )
        what = "the answer's body was not complete" if self.answered else "no answer"
        return TransportFailure(
            "ReadTimeout",
            f"{what} within {timeout:g} s (EXCHANGE_HTTP_TIMEOUT bounds the whole request)",
            maybe_sent=True,
        )


class Wire:
    name = ""

    async def request(
        self, method: str, path: str, content: bytes | None, headers: dict[str, str], cap: int
    ) -> SiteResult:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError
