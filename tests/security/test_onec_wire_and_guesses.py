"""The attacker's catalogue, third round: what 1C reads in an answer, what an archive of
images costs, and how fast a stranger may guess the 1C password or the intake token."""

from __future__ import annotations

import time
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from web_helpers import PASSWORD, TOKEN, USER

from exchange.dev.cml_gen import CmlOffer, CmlPrice, CmlType, Package, offers_xml
from exchange.dev.onec_client import OneCClient
from exchange.web import files
from exchange.web.throttle import Guesses

Serve = Callable[..., str]
RETAIL = CmlType("t-retail", "Розничная", "руб")
TYPES = {"1c_price_types": {"Розничная": "retail"}}


def offers() -> bytes:
    return offers_xml(
        Package(types=[RETAIL], offers=[CmlOffer("A", [CmlPrice("t-retail", "1.00", "руб")])])
    )


@pytest.fixture
def onec(serve: Serve) -> Iterator[OneCClient]:
    c = OneCClient(serve(**TYPES), USER, PASSWORD)
    assert c.checkauth().status == "success"
    c.init()
    yield c
    c.close()


def test_1c_answers_are_windows_1251_text_with_that_charset_named(onec: OneCClient) -> None:
    """Contract 9a: after the ASCII first line, plain text in windows-1251, named in
    Content-Type, as 1C-Bitrix answers (1C shows a Cyrillic reason as it reads it)."""
    response = onec._request("POST", "file", body=b"<x/>", filename="цены.xml")
    assert "windows-1251" in response.headers["content-type"].lower()
    assert response.content.decode("cp1251").startswith("success\n")
    assert "цены.xml" in response.content.decode("cp1251")
    refused = onec._request("GET", "import", filename="цены.xml")
    while refused.text.startswith("progress"):  # a loaded machine: the import still runs
        refused = onec._request("GET", "import", filename="цены.xml")
    assert "windows-1251" in refused.headers["content-type"].lower()
    text = refused.content.decode("cp1251")
    assert text.startswith("failure\n") and "цены.xml" in text and "КоммерческаяИнформация" in text


def test_an_archive_of_many_images_is_read_without_resolving_their_names_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Images are dropped unread (contract 9a): their names are checked as names, never
    resolved on disk (~1 ms apiece, so 500,000 empty members held an import for minutes);
    only the XML files written are resolved (zip slip still refused: test_onec_files)."""
    archive = tmp_path / "v8.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("offers.xml", offers())
        for n in range(2_000):
            zf.writestr(f"import_files/{n % 100}/{n}.jpg", b"")
    resolved: list[str] = []
    real_inside = files.inside

    def counting_inside(folder: Path, name: str) -> Path:
        resolved.append(name)
        return real_inside(folder, name)

    monkeypatch.setattr(files, "inside", counting_inside)
    out = tmp_path / "out"
    out.mkdir()
    written = files.unpack(archive, out, max_bytes=1 << 30, max_ratio=1000)
    assert ["offers.xml"] == written
    assert ["offers.xml"] == resolved


def _knock(client: httpx.Client, door: str, secret: str, address: str) -> httpx.Response:
    """One try at a way in with a secret, from ``address`` (the proxy's X-Forwarded-For)."""
    forwarded = {"X-Forwarded-For": address}
    if door == "1c":
        return client.get(
            "/1c_exchange.php",
            params={"type": "catalog", "mode": "checkauth"},
            auth=(USER, secret),
            headers=forwarded,
        )
    return client.post(
        "/api/v1/intents",
        json={"intents": []},
        headers={**forwarded, "Authorization": f"Bearer {secret}"},
    )


def _refused_as_too_many(door: str, answer: httpx.Response) -> bool:
    if door == "1c":
        return (
            answer.text.startswith("failure\n") and "Слишком много неверных паролей" in answer.text
        )
    return answer.status_code == 429 and int(answer.headers["Retry-After"]) >= 1


@pytest.mark.timing
@pytest.mark.parametrize("door", ["1c", "intake"])
def test_wrong_credentials_from_one_address_are_slowed_down(serve: Serve, door: str) -> None:
    """Contract 9: an unauthenticated request is rate-limited. A wrong secret's answer is held
    (1 s, then 2 s: the workbench's rule), a try beside a held one is refused before its secret
    is checked, even the right secret, and an address with no failures is never refused.
    Margins: the holds are lower bounds (a loaded machine only lengthens them); the parallel
    try starts 0.3 s into a 1 s hold."""
    secret = PASSWORD if door == "1c" else TOKEN
    base = serve(**TYPES, http_behind_proxy=True)
    attacker, onec = "203.0.113.7", "198.51.100.20"
    with httpx.Client(base_url=base, timeout=30) as client, ThreadPoolExecutor(1) as pool:
        start = time.monotonic()
        held = pool.submit(_knock, client, door, "guess-0001", attacker)
        time.sleep(0.3)
        assert _refused_as_too_many(door, _knock(client, door, secret, attacker))
        # 1C elsewhere is not locked out by the attacker's guesses.
        assert not _refused_as_too_many(door, _knock(client, door, secret, onec))
        first = held.result()
        assert not _refused_as_too_many(door, first)
        assert time.monotonic() - start >= 1.0
        second = time.monotonic()
        _knock(client, door, "guess-0002", attacker)
        assert time.monotonic() - second >= 2.0


def test_a_wrong_secret_makes_only_its_address_wait_doubling_per_failure() -> None:
    """The rule of ``Guesses``, on an injected clock: holds of 1, 2, 4 … 16 s after wrong
    secrets, a try inside the wait refused before its secret is checked, another address
    never refused, and the failures forgotten after an hour."""
    now = [100.0]
    guesses = Guesses("1c", clock=lambda: now[0])
    holds = []
    for _ in range(6):
        assert guesses.admit("attacker").allowed
        holds.append(guesses.judged("attacker", right=False))
        assert not guesses.admit("attacker").allowed  # inside the wait
        assert guesses.admit("1c-server").allowed
        guesses.judged("1c-server", right=True)
        now[0] += holds[-1]
    assert [1.0, 2.0, 4.0, 8.0, 16.0, 16.0] == holds
    now[0] += 3601
    assert guesses.admit("attacker").allowed
    assert 1.0 == guesses.judged("attacker", right=False)
