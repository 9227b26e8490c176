"""``exchange withheld release`` with several channels (issue 32): it judges and releases the
named channel's delivery, never another channel's; without ``--channel`` it acts on the one
channel where the message is withheld, and where it is withheld on several it asks which (one
line, exit 2). The site (its withholding switch) and the Yandex Market simulator withhold the
same drop."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from clitools import Cli, describe
from sqlalchemy import Engine
from withheld_two import Two, states, two_channels, withheld_on_both

from exchange.words import error_words


@pytest.fixture
def two(tmp_path: Path) -> Iterator[Two]:
    with two_channels(tmp_path) as found:
        yield found


def test_a_release_acts_on_the_named_channel_else_the_one_withholding_else_asks_which(
    cli: Cli, db_url: str, engine: Engine, two: Two
) -> None:
    mid = _ready(db_url, engine, two)
    # `exchange status` lists it on each channel, named, with the channel's words (issue 32:
    # it listed the first channel's alone, so a price Yandex withholds was a bare count).
    status = cli("status", db=db_url, env=two.env)
    listed = [line for line in status.stdout.splitlines() if mid in line]
    assert len(listed) == 2, describe(status)
    assert any(" market " in f" {line} " for line in listed), describe(status)
    assert any(" api " in f" {line} " for line in listed), describe(status)
    assert "--channel CHANNEL" in status.stdout, describe(status)
    # Withheld on both: which one is asked, in one line, and nothing is done.
    ask = cli("withheld", "release", mid, "--note", "a real sale", db=db_url, env=two.env)
    assert ask.returncode == 2, describe(ask)
    assert "--channel" in ask.stderr and "api, market" in ask.stderr, describe(ask)
    assert len(ask.stderr.strip().splitlines()) == 1, describe(ask)
    ru = cli(
        "withheld", "release", mid, "--note", "x", db=db_url, env={**two.env, "EXCHANGE_LANG": "ru"}
    )
    assert ru.returncode == 2 and "укажите, в каком выпустить" in ru.stderr, describe(ru)
    assert states(engine, mid) == {"api": "withheld", "market": "withheld"}

    # Named: that channel's delivery is judged and released; Yandex's stays withheld.
    site = cli(
        "withheld",
        "release",
        mid,
        "--note",
        "a real sale",
        "--channel",
        "api",
        db=db_url,
        env=two.env,
    )
    assert site.returncode == 0, describe(site)
    assert f"{mid}: delivered" in site.stdout, describe(site)
    assert two.site.effect_counts()[mid] == 1
    assert states(engine, mid) == {"api": "delivered", "market": "withheld"}

    # Delivered on the site, withheld on Yandex Market alone: without --channel, that one is
    # judged and asked (the owner's case: never refused for the site's «delivered»).
    market = cli("withheld", "release", mid, "--note", "a real sale", db=db_url, env=two.env)
    assert market.returncode == 0, describe(market)
    assert "price-quarantine/confirm" in market.stdout, describe(market)
    assert two.site.effect_counts()[mid] == 1, "the site was not asked again"
    named = cli(
        "withheld",
        "release",
        mid,
        "--note",
        "a real sale",
        "--channel",
        "market",
        db=db_url,
        env=two.env,
    )
    assert named.returncode == 0, describe(named)
    # Asked again, or found live: Yandex applies the first confirm when it will (the simulator
    # after its scaled delay; a loaded CI run was slower than it once), and either is the
    # named channel's own answer
    assert "price-quarantine/confirm" in named.stdout or "already live" in named.stdout, describe(
        named
    )

    # The site's delivery is delivered: named, it is judged by the site's own state.
    again = cli(
        "withheld", "release", mid, "--note", "x", "--channel", "api", db=db_url, env=two.env
    )
    assert again.returncode == 2 and "is delivered" in again.stderr, describe(again)

    # sellerwords 4: an id that is no message is said to be none, in either language, never
    # «… — придержано каналом on no channel»; a delivered one is withheld on no channel.
    for lang, said in (
        ("en", "no such message: no-such-id"),
        ("ru", "ошибка: нет такого сообщения: no-such-id"),
    ):
        unknown = cli(
            "withheld",
            "release",
            "no-such-id",
            "--note",
            "x",
            db=db_url,
            env={**two.env, "EXCHANGE_LANG": lang},
        )
        assert unknown.returncode == 2 and said in unknown.stderr, describe(unknown)
        assert "on no channel" not in unknown.stderr, describe(unknown)
    said = error_words(
        "only withheld messages can be released: m-1, m-2 are withheld on no channel", "ru"
    )
    assert said == (
        "выпустить можно только придержанные сообщения: ни один канал не придерживает m-1, m-2"
    ), said


def _ready(db_url: str, engine: Engine, two: Two) -> str:
    return withheld_on_both(db_url, engine, two)


def test_a_second_release_of_a_price_yandex_already_shows_says_so_and_exits_0(
    cli: Cli, db_url: str, engine: Engine, two: Two
) -> None:
    """Promise (issue 32, mpminor item 6): Yandex confirmed a release and shows the price (it
    applies within minutes); a second ``withheld release`` of it says it is live already, the
    delivery ends delivered, and the exit is 0: nothing left to release is no refusal."""
    mid = _ready(db_url, engine, two)
    release = ("withheld", "release", mid, "--note", "a real sale", "--channel", "market")
    first = cli(*release, db=db_url, env=two.env)
    assert first.returncode == 0 and "price-quarantine/confirm" in first.stdout, describe(first)
    deadline = time.monotonic() + 10
    while True:  # the simulator applies it half a real second later
        again = cli(*release, db=db_url, env=two.env)
        if "price-quarantine/confirm" not in again.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert again.returncode == 0, describe(again)
    said = " ".join(again.stdout.split())
    assert "already live 1, not released 0" in said, describe(again)
    assert f"{mid}: already live, nothing to release" in said, describe(again)
    assert states(engine, mid)["market"] == "delivered"
    ru = cli(*release, db=db_url, env={**two.env, "EXCHANGE_LANG": "ru"})
    assert ru.returncode == 2, describe(ru)  # delivered now: the usual refusal, unchanged


def test_status_at_80_columns_fits_them_with_its_words_whole(
    cli: Cli, db_url: str, engine: Engine, two: Two
) -> None:
    """Promise (issue 32, mpminor item 2): ``status`` piped (80 columns) never prints a line
    wider than 80: the withheld list with two channels was 101 wide, its title 92; and no
    header or name is cut mid-word («quarantin|ed», «получател|ь», «test-worker/ap|i»). A
    withheld id too long for its column folds whole (never "…"), its first line a beginning
    ``find`` finds it by."""
    mid = _ready(db_url, engine, two)
    for lang, words in (
        ("en", ("quarantined", "withheld", "test-worker/market", "channel")),
        ("ru", ("карантине", "придержано", "обработчиков", "test-worker/market")),
    ):
        status = cli("status", db=db_url, env={**two.env, "COLUMNS": "80", "EXCHANGE_LANG": lang})
        # (the database's address, one word as long as the test's directory, aside)
        lines = status.stdout.splitlines()[1:]
        assert max(len(line) for line in lines) <= 80, describe(status)
        cells = [cell.strip() for line in lines for cell in line.split("│")]
        for word in words:
            assert word in cells or any(word in cell.split() for cell in cells), (
                word,
                describe(status),
            )
        withheld = [line.split("│")[1].strip() for line in lines if line.startswith("│ price.")]
        assert withheld and all(mid.startswith(first) for first in withheld), describe(status)
        assert "…" not in "".join(withheld), describe(status)
