"""A 1C client emulator: the requests 1C's «Обмен с сайтом» sends to a site (contract 9a).

checkauth (HTTP Basic) -> init -> file (each file in chunks of file_limit, or one zip archive
when the site says zip=yes) -> import, repeated while the answer is ``progress`` -> deactivate
-> complete. Like 1C it refuses any first line other than success, progress or failure. Used
by the tests against a real ``exchange serve`` and by the bench.
"""

from __future__ import annotations

import io
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx

FIRST_LINES = ("success", "progress", "failure")


class ProtocolError(AssertionError):
    """An answer 1C would not accept: "Получен неизвестный статус импорта"."""


@dataclass
class Answer:
    status: str
    lines: list[str]

    @property
    def text(self) -> str:
        return " ".join(self.lines)


@dataclass
class ExchangeLog:
    answers: dict[str, Answer] = field(default_factory=dict)
    progress: dict[str, int] = field(default_factory=dict)
    requests: int = 0


class OneCClient:
    def __init__(
        self,
        base_url: str,
        user: str,
        password: str,
        *,
        path: str = "/1c_exchange.php",
        client: httpx.Client | None = None,
        use_zip: bool = True,
        max_chunk: int | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + path
        self.auth = (user, password)
        self.http = client or httpx.Client(timeout=60, verify=False)
        self.use_zip = use_zip
        self.max_chunk = max_chunk
        self.cookie: tuple[str, str] | None = None
        self.sessid: str | None = None
        self.zip = False
        self.file_limit = 200 * 1024
        self.requests = 0

    def close(self) -> None:
        self.http.close()

    def _request(
        self, method: str, mode: str, *, body: bytes | None = None, **params: str
    ) -> httpx.Response:
        query = {"type": "catalog", "mode": mode, **params}
        if self.sessid is not None and mode != "checkauth":
            query["sessid"] = self.sessid
        headers = {"User-Agent": "1C+Enterprise/8.3"}
        if self.cookie and mode != "checkauth":
            headers["Cookie"] = f"{self.cookie[0]}={self.cookie[1]}"
        self.requests += 1
        return self.http.request(
            method,
            self.url,
            params=query,
            content=body,
            headers=headers,
            auth=self.auth if mode == "checkauth" else None,
        )

    @staticmethod
    def read(response: httpx.Response) -> Answer:
        lines = response.text.replace("\r\n", "\n").split("\n")
        while lines and lines[-1] == "":
            lines.pop()
        first = lines[0] if lines else ""
        if first not in FIRST_LINES and not first.startswith("zip="):
            raise ProtocolError(f"unknown first line {first!r} (HTTP {response.status_code})")
        if not first.isascii():
            raise ProtocolError("first line not ASCII")
        return Answer(first, lines[1:])

    def checkauth(self) -> Answer:
        answer = self.read(self._request("GET", "checkauth"))
        if answer.status == "success":
            self.cookie = (answer.lines[0], answer.lines[1])
            for line in answer.lines[2:]:
                if line.startswith("sessid="):
                    self.sessid = line.removeprefix("sessid=")
        return answer

    def init(self) -> Answer:
        answer = self.read(self._request("GET", "init"))
        if answer.status.startswith("zip="):
            self.zip = answer.status == "zip=yes"
            for line in answer.lines:
                if line.startswith("file_limit="):
                    self.file_limit = int(line.removeprefix("file_limit="))
        return answer

    def upload(self, name: str, data: bytes) -> Answer:
        chunk = min(self.file_limit, self.max_chunk or self.file_limit)
        answer = Answer("success", [])
        for start in range(0, max(len(data), 1), chunk):
            answer = self.read(
                self._request("POST", "file", body=data[start : start + chunk], filename=name)
            )
            if answer.status != "success":
                return answer
        return answer

    def import_file(self, name: str, *, timeout: float = 300.0) -> tuple[Answer, int]:
        """``import`` until it is not ``progress``; the answer and how many progress answers."""
        deadline = time.monotonic() + timeout
        rounds = 0
        while True:
            answer = self.read(self._request("GET", "import", filename=name))
            if answer.status != "progress":
                return answer, rounds
            rounds += 1
            if time.monotonic() > deadline:
                raise ProtocolError(f"import of {name} still in progress after {timeout} s")

    def deactivate(self) -> Answer:
        return self.read(self._request("GET", "deactivate", timestamp=str(int(time.time()))))

    def complete(self) -> Answer:
        return self.read(self._request("GET", "complete"))

    def exchange(self, files: Sequence[tuple[str, bytes]]) -> ExchangeLog:
        """The whole sequence 1C sends for ``files`` (name, content), in order."""
        result = ExchangeLog()
        answer = self.checkauth()
        if answer.status != "success":
            raise ProtocolError(f"checkauth: {answer.status} {answer.text}")
        self.init()
        if self.zip and self.use_zip:
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
                for name, data in files:
                    archive.writestr(name, data)
            uploaded = self.upload("v8_0001_01.zip", buffer.getvalue())
            if uploaded.status != "success":
                raise ProtocolError(f"upload: {uploaded.status} {uploaded.text}")
        else:
            for name, data in files:
                uploaded = self.upload(name, data)
                if uploaded.status != "success":
                    result.answers[name] = uploaded
        for name, _ in files:
            if name in result.answers or not name.lower().endswith(".xml"):
                continue
            answer, rounds = self.import_file(name)
            result.answers[name] = answer
            result.progress[name] = rounds
        self.deactivate()
        self.complete()
        result.requests = self.requests
        return result
