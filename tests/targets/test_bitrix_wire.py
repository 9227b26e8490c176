"""The Bitrix target's requests have exactly the form 1C's own exchange sends (issue 22 item 9),
so that every receiver that works with 1C works with the service: ``?type=catalog&mode=…``
appended as text to the address the administrator typed, even one holding a query already
(wc1c's ``…&get_param``); GET for checkauth, init and import, POST with the raw file as the
body and ``filename=`` in the query; Basic at checkauth only, then the cookie it named as
``Cookie: <name>=<value>`` and its ``sessid`` in the query. Where each fact comes from:
docs/targets.md, "The Bitrix target's requests".
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator

import httpx
import pytest
from conformance import price

from exchange.dev.bitrixsim import COOKIE, PATH, BitrixSimulator
from exchange.domain.verdicts import Verdict
from exchange.errors import ConfigurationError
from exchange.settings import load_settings
from exchange.targets.bitrix.target import BitrixTarget, exchange_url


def target(url: str) -> BitrixTarget:
    return BitrixTarget(
        url,
        "exchange",
        lambda: "secret",
        catalog_id="catalog-1",
        price_types={"retail": "Розничная"},
        max_import_steps=20,
        timeout=2.0,
    )


@pytest.fixture(params=["bitrix", "wc1c"])
def site(request: pytest.FixtureRequest) -> Iterator[BitrixSimulator]:
    simulator = BitrixSimulator("exchange", "secret", receiver=request.param)
    simulator.start()
    yield simulator
    simulator.stop()


def send(site: BitrixSimulator, url: str) -> list[Verdict]:
    bitrix = target(url)

    async def go() -> list[Verdict]:
        try:
            return [a.verdict for a in await bitrix.send([price("SKU-1", 1, "12.50")])]
        finally:
            await bitrix.aclose()

    return asyncio.run(go())


def test_every_step_has_1cs_form_on_bitrix_and_on_wc1c(site: BitrixSimulator) -> None:
    """The address typed (Bitrix's script, or wc1c's receiver with its query) is followed by
    ``?type=catalog&mode=<step>`` as text; each step's method, query and headers are 1C's."""
    typed = site.receiver_url

    assert [Verdict.DELIVERED] == send(site, typed)
    assert "12.50" == site.price("SKU-1")

    typed_query = typed.partition("?")[2]
    prefix = f"{typed_query}?" if typed_query else ""
    (checkauth, *rest) = site.seen
    method, query, headers = checkauth
    assert ("GET", f"{prefix}type=catalog&mode=checkauth") == (method, query)
    expected = "Basic " + base64.b64encode(b"exchange:secret").decode()
    assert expected == headers["authorization"]
    assert "cookie" not in headers
    steps = [(m, q.removeprefix(prefix).split("&sessid=")[0]) for m, q, _ in rest]
    assert [
        ("GET", "type=catalog&mode=init"),
        ("POST", "type=catalog&mode=file"),
        ("GET", "type=catalog&mode=import"),
        ("GET", "type=catalog&mode=import"),
    ] == steps
    for method, query, headers in rest:
        sessid = query.split("&sessid=")[1].split("&")[0]
        assert sessid and query.startswith(prefix)
        assert "authorization" not in headers, "Basic at checkauth only; then the cookie"
        assert headers["cookie"].startswith(f"{COOKIE}=") and ";" not in headers["cookie"]
        if method == "POST":  # the file itself is the body, never a multipart form
            assert query.endswith("&filename=offers.xml")
            assert "multipart" not in headers.get("content-type", "")
            assert int(headers["content-length"]) == len(site.packages[0])
        elif "mode=import" in query:
            assert query.endswith("&filename=offers.xml")


def test_a_merged_query_is_not_1cs_form_and_wc1c_refuses_it() -> None:
    """Why the form matters: wc1c reads ``type`` as ``get_param?type`` (or inside a non-empty
    ``get_param``); the query an HTTP library merges (``…&get_param=&type=catalog&mode=…``)
    reaches it with no type, and it refuses; 1C's form is understood."""
    with BitrixSimulator("exchange", "secret", receiver="wc1c") as site:
        assert isinstance(site, BitrixSimulator)
        params = {"type": "catalog", "mode": "checkauth"}
        merged = httpx.URL(site.receiver_url).copy_merge_params(params)
        as_1c = exchange_url(site.receiver_url, params)
        assert as_1c == site.receiver_url + "?type=catalog&mode=checkauth"
        auth = ("exchange", "secret")
        refused = httpx.get(merged, auth=auth).text
        accepted = httpx.get(as_1c, auth=auth).text

    assert refused.startswith("failure\nSchema: action not found"), refused
    assert accepted.startswith("success\n"), accepted


def test_the_exchange_address_is_kept_as_typed_query_and_slash_included() -> None:
    typed = "https://shop.example.com/?wc1c-receiver=3&lazysign=abc&get_param"
    assert typed == load_settings(target="bitrix", bitrix_url=typed).bitrix_url
    slash = "https://shop.example.com/1c_exchange.php/"
    assert slash == load_settings(target="bitrix", bitrix_url=slash).bitrix_url
    with pytest.raises(ConfigurationError, match="fragment"):
        load_settings(target="bitrix", bitrix_url="https://shop.example.com/x.php#top")


def test_bitrix_reads_the_query_as_php_does() -> None:
    """The simulator's ``$_GET`` is PHP's: the last of a repeated name wins, a dot in a name is
    an underscore, a ``?`` inside the query belongs to a name."""
    from exchange.dev.httpsim import php_get

    assert {"a_b": "2", "mode": "import", "get_param?type": "catalog"} == php_get(
        "a.b=1&a.b=2&mode=init&mode=import&get_param?type=catalog"
    )
    assert PATH == "/bitrix/admin/1c_exchange.php"
