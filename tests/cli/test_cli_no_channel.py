"""Contract 1 "Nothing is dropped silently" with contract 13's channels: a kind no registered
channel takes (a ``financial_posting`` where only the marketplaces, which take prices, are
configured) becomes a message with no delivery. It is kept, so it must be seen and be
recoverable: ``status`` counts it as a cause needing a person (``no-channel:KIND``, exit 1,
in English and Russian, with what to do), ``find`` and ``history`` find it and say that no
channel takes its kind, and ``channels seed NAME --from MESSAGE_ID`` of a channel configured
later to take it gives it a delivery (a strictly ordered kind: the seed without ``--from``
starts at the channel's registration, after the message)."""

from __future__ import annotations

import json
from pathlib import Path

from clitools import FAST_ENV, TOKEN, Cli, describe, run_json
from sqlalchemy import Engine, select, update

from exchange.db.engine import transaction
from exchange.db.schema import channels, deliveries, messages
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import posting_row, price_row, stage
from exchange.domain.clock import SystemClock
from exchange.domain.policy import DEFAULT_KINDS
from exchange.intake import staging_table as intake


def _secret(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text + "\n", encoding="utf-8")
    return str(path)


def _marketplaces(tmp_path: Path) -> dict[str, dict[str, object]]:
    """The three marketplace channels of the review: each takes prices only."""
    return {
        "ozon": {
            "target": "ozon",
            "ozon_client_id": "836741",
            "ozon_api_key_file": _secret(tmp_path, "ozon", "k" * 36),
            "ozon_price_types": {"retail": "price"},
        },
        "wb": {
            "target": "wildberries",
            "wb_price_types": {"retail": "price"},
            "wb_token_file": _secret(tmp_path, "wb", "t" * 40),
        },
        "ym": {
            "target": "yandex-market",
            "ym_price_types": {"retail": "value"},
            "ym_business_id": 1001,
            "ym_api_key_file": _secret(tmp_path, "ym", "y" * 40),
        },
    }


def _env(named: dict[str, dict[str, object]]) -> dict[str, str | None]:
    return {"EXCHANGE_CHANNELS": json.dumps(named), "EXCHANGE_SITE_TOKEN": None}


def _only_marketplaces(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path
) -> dict[str, str | None]:
    """The registry of the review: the three marketplaces, registered by ``migrate``, and
    no other channel in use (the ``api`` channel the fixture's migrate registered dropped)."""
    env = _env(_marketplaces(tmp_path))
    with transaction(engine) as connection:
        connection.execute(
            update(channels).where(channels.c.name == "api").values(dropped_at=SystemClock().now())
        )
    migrated = cli("migrate", db=db_url, env=env)
    assert migrated.returncode == 0, describe(migrated)
    return env


def _posting_taken(engine: Engine) -> str:
    stage(engine, [posting_row("ACC-16", 1, amount="1250.00")])
    intake.take(engine, None, DEFAULT_KINDS, SystemClock().now())
    with transaction(engine) as connection:
        row = connection.execute(
            select(messages.c.id, messages.c.message_id).where(
                messages.c.kind == "financial_posting"
            )
        ).one()
        assert (
            connection.execute(
                select(deliveries.c.channel_id).where(deliveries.c.message_pk == row.id)
            ).all()
            == []
        ), "intake gives a kind no channel takes no delivery (unchanged)"
    return str(row.message_id)


def test_a_posting_no_channel_takes_is_a_cause_found_and_seeded_from_it(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path
) -> None:
    env = _only_marketplaces(cli, db_url, engine, tmp_path)
    message_id = _posting_taken(engine)

    # status --json: a cause of its own, by kind, exit 1, with the command that recovers it
    figures = run_json(cli, "status", "--json", db=db_url, env=env, code=1)
    assert "no-channel:financial_posting" in figures["needs_person_causes"], figures
    said = figures["needs_person"][
        figures["needs_person_causes"].index("no-channel:financial_posting")
    ]
    assert said == (
        f"1 message of kind financial_posting is kept and delivered nowhere: no channel takes "
        f"that kind (the oldest {message_id}). Configure a channel whose takes include "
        f"financial_posting, then give it them: exchange channels seed NAME --from {message_id}"
    )
    text = cli("status", db=db_url, env=env)
    assert text.returncode == 1, describe(text)
    assert "1 message of kind financial_posting is kept and delivered nowhere" in " ".join(
        text.stdout.split()
    ), describe(text)
    russian = cli("status", db=db_url, env={**env, "EXCHANGE_LANG": "ru"})
    words = " ".join(russian.stdout.split())
    assert russian.returncode == 1, describe(russian)
    assert "финансовая проводка (financial_posting)" in words, describe(russian)
    assert "ни один канал не принимает" in words, describe(russian)
    assert f"exchange channels seed ИМЯ --from {message_id}" in words, describe(russian)

    # find and history: the message is there, on no channel, saying why
    found = run_json(cli, "find", "ACC-16", "--json", db=db_url, env=env)
    assert [(r["message_id"], r["deliveries"], r["delivered_nowhere"]) for r in found] == [
        (message_id, {}, True)
    ]
    assert found[0]["state"] is None and found[0]["channel"] is None  # on no channel: no state
    assert found[0]["no_channel_takes"] is True
    shown = cli("find", "ACC-16", db=db_url, env=env)
    assert shown.returncode == 0, describe(shown)
    assert "no message matches" not in shown.stdout
    assert "no channel takes financial_posting: this message is delivered nowhere" in " ".join(
        shown.stdout.split()
    ), describe(shown)
    found_ru = cli("find", "ACC-16", db=db_url, env={**env, "EXCHANGE_LANG": "ru"})
    assert "ни один канал не принимает financial_posting" in " ".join(found_ru.stdout.split()), (
        describe(found_ru)
    )
    story = run_json(cli, "history", message_id, "--json", db=db_url, env=env)
    assert story["message"]["delivered_nowhere"] is True
    assert story["message"]["no_channel_takes"] is True and story["deliveries"] == []
    told = cli("history", message_id, db=db_url, env=env)
    assert told.returncode == 0, describe(told)
    assert f"exchange channels seed NAME --from {message_id}" in " ".join(told.stdout.split()), (
        describe(told)
    )
    told_ru = cli("history", message_id, db=db_url, env={**env, "EXCHANGE_LANG": "ru"})
    assert told_ru.returncode == 0, describe(told_ru)
    assert "ни один канал не принимает financial_posting" in " ".join(told_ru.stdout.split()), (
        describe(told_ru)
    )

    # a channel that takes postings, configured after: registered by the seed, after the
    # message, so the plain seed starts past it; ``--from`` (the words' command) gives it
    ledger = {
        "target": "api",
        "site_url": "https://books.example.com",
        "site_token_file": _secret(tmp_path, "token", TOKEN),
        "takes": ["financial_posting"],
    }
    with_ledger = _env({**_marketplaces(tmp_path), "ledger": ledger})
    plain = cli("channels", "seed", "ledger", db=db_url, env=with_ledger)
    assert plain.returncode == 0, describe(plain)
    assert "channel ledger: 0 deliveries created" in plain.stdout, describe(plain)
    seeded = cli("channels", "seed", "ledger", "--from", message_id, db=db_url, env=with_ledger)
    assert seeded.returncode == 0, describe(seeded)
    assert "channel ledger: 1 delivery created" in seeded.stdout, describe(seeded)
    story = run_json(cli, "history", message_id, "--json", db=db_url, env=with_ledger)
    assert [(d["channel"], d["state"]) for d in story["deliveries"]] == [("ledger", "new")]
    assert story["message"]["delivered_nowhere"] is False
    assert not _no_channel_causes(cli, db_url, with_ledger)


def _no_channel_causes(cli: Cli, db_url: str, env: dict[str, str | None] | None) -> list[str]:
    result = cli("status", "--json", db=db_url, env=env)
    assert result.returncode in (0, 1), describe(result)
    codes = json.loads(result.stdout)["needs_person_causes"]
    return [code for code in codes if code.startswith("no-channel")]


def test_every_kind_taken_is_no_cause(cli: Cli, db_url: str, engine: Engine) -> None:
    """The one ``api`` channel takes every kind: a posting gets its delivery, no cause."""
    stage(engine, [posting_row("ACC-17", 1)])
    intake.take(engine, None, DEFAULT_KINDS, SystemClock().now())
    assert not _no_channel_causes(cli, db_url, None)


def _site_deliveries(engine: Engine) -> list[tuple[int, str, str | None]]:
    """The site channel's deliveries of ACC-16: (version, state, reason), by version."""
    with transaction(engine) as connection:
        rows = connection.execute(
            select(deliveries.c.version, deliveries.c.state, deliveries.c.reason)
            .join(channels, channels.c.id == deliveries.c.channel_id)
            .join(messages, messages.c.id == deliveries.c.message_pk)
            .where(channels.c.name == "site", messages.c.aggregate == "ACC-16")
            .order_by(deliveries.c.version)
        ).all()
    return [(int(version), state, reason) for version, state, reason in rows]


def test_a_kept_posting_stays_a_cause_and_its_next_version_waits_for_its_seed(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path, site: SiteSimulator
) -> None:
    """Review 32k finding 1, a person's ordinary steps: posting v1 accepted while only the
    marketplaces (prices only) are configured, so kept with no delivery; a site channel that
    takes postings is configured and runs; 1C writes v2; then the runbook's seed from v1.
    Promises: the kept v1 stays a ``no-channel`` cause in ``status`` once a channel takes
    postings (contract 1: nothing dropped silently), v2 never goes to the site before v1
    (contract 3 strict order, 13: it waits behind the kept version, no gap quarantined, and
    ``run --until-idle`` does not wait for a person's seed), and ``channels seed site --from
    v1`` delivers v1 then v2 there, nothing cancelled stale."""
    env = _only_marketplaces(cli, db_url, engine, tmp_path)
    first = _posting_taken(engine)
    shop = {
        "target": "api",
        "site_url": site.url,
        "site_token_file": _secret(tmp_path, "token", TOKEN),
        "takes": ["financial_posting"],
    }
    with_site = {**FAST_ENV, "EXCHANGE_GAP_TIMEOUT": "0.01"}
    with_site.update(_env({**_marketplaces(tmp_path), "site": shop}))
    assert env["EXCHANGE_CHANNELS"] != with_site["EXCHANGE_CHANNELS"]

    # The site channel configured and running: v1 is still kept nowhere, and said so.
    ran = cli("run", "--until-idle", "--channel", "site", db=db_url, env=with_site)
    assert ran.returncode == 0, describe(ran)
    assert _no_channel_causes(cli, db_url, with_site) == ["no-channel:financial_posting"]
    figures = run_json(cli, "status", "--json", db=db_url, env=with_site, code=1)
    said = figures["needs_person"][
        figures["needs_person_causes"].index("no-channel:financial_posting")
    ]
    assert said == (
        f"1 message of kind financial_posting is kept and delivered nowhere: no channel took "
        f"that kind when it was accepted (the oldest {first}), and the channel that takes it "
        f"now was not given it. Give it to that channel: exchange channels seed NAME --from "
        f"{first}"
    )
    russian = cli("status", db=db_url, env={**with_site, "EXCHANGE_LANG": "ru"})
    assert f"exchange channels seed ИМЯ --from {first}" in " ".join(russian.stdout.split()), (
        describe(russian)
    )

    # 1C writes v2: it reaches the site channel, and waits there behind the kept v1.
    stage(engine, [posting_row("ACC-16", 2, amount="1300.00")])
    ran = cli("run", "--until-idle", "--channel", "site", db=db_url, env=with_site)
    assert ran.returncode == 0, describe(ran)
    assert site.applied_versions("financial_posting", "ACC-16") == []
    assert _site_deliveries(engine) == [(2, "new", None)]
    assert _no_channel_causes(cli, db_url, with_site) == ["no-channel:financial_posting"]

    # The runbook's recovery: v1, then v2, delivered to the site; nothing stale.
    seeded = cli("channels", "seed", "site", "--from", first, db=db_url, env=with_site)
    assert seeded.returncode == 0, describe(seeded)
    assert "channel site: 1 delivery created" in seeded.stdout, describe(seeded)
    ran = cli("run", "--until-idle", "--channel", "site", db=db_url, env=with_site)
    assert ran.returncode == 0, describe(ran)
    assert site.applied_versions("financial_posting", "ACC-16") == [1, 2]
    assert _site_deliveries(engine) == [(1, "delivered", None), (2, "delivered", None)]
    assert not _no_channel_causes(cli, db_url, with_site)


def test_a_kept_price_counts_until_a_newer_price_goes_somewhere(engine: Engine) -> None:
    """Review 32k finding 1, for a coalescing kind: a price taken while no channel takes
    prices is kept nowhere and stays counted once a channel takes prices (contract 1: until
    a seed gives it a delivery); a newer price of the same product that goes to that channel
    replaces it (latest wins, contract 3), and the kept one is no longer counted."""
    from exchange.db.channels import kept_nowhere

    def counted() -> dict[str, dict[str, object]]:
        with transaction(engine) as connection:
            return kept_nowhere(connection, ["financial_posting", "price"], coalescing=["price"])

    with transaction(engine) as connection:
        connection.execute(update(channels).values(takes='["financial_posting"]'))
    stage(engine, [price_row("SKU-16", 1, "10.00")])
    intake.take(engine, None, DEFAULT_KINDS, SystemClock().now())
    kept = counted()
    assert kept["price"]["count"] == 1 and kept["price"]["taken"] is False, kept
    with transaction(engine) as connection:
        connection.execute(update(channels).values(takes='["financial_posting", "price"]'))
    kept = counted()
    assert kept["price"]["count"] == 1 and kept["price"]["taken"] is True, kept
    stage(engine, [price_row("SKU-16", 2, "11.00")])
    intake.take(engine, None, DEFAULT_KINDS, SystemClock().now())
    assert counted() == {}


def _message_ids(engine: Engine) -> dict[tuple[str, int], str]:
    """The postings' message ids by (aggregate, version)."""
    with transaction(engine) as connection:
        rows = connection.execute(
            select(messages.c.aggregate, messages.c.version, messages.c.message_id).where(
                messages.c.kind == "financial_posting"
            )
        ).all()
    return {(str(a), int(v)): str(m) for a, v, m in rows}


def _kept_behind(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path, site: SiteSimulator
) -> tuple[dict[str, str | None], dict[tuple[str, int], str]]:
    """Review 32k (second pass): postings DOC-1 v1, v2 and DOC-2 v1 kept nowhere (only the
    marketplaces configured); a site channel that takes postings is configured and 1C writes
    DOC-1 v3, which waits there behind the kept versions. The site's settings and the
    postings' message ids."""
    env = _only_marketplaces(cli, db_url, engine, tmp_path)
    stage(
        engine,
        [
            posting_row("DOC-1", 1, amount="100.00"),
            posting_row("DOC-1", 2, amount="200.00"),
            posting_row("DOC-2", 1, amount="5.00"),
        ],
    )
    intake.take(engine, None, DEFAULT_KINDS, SystemClock().now())
    shop = {
        "target": "api",
        "site_url": site.url,
        "site_token_file": _secret(tmp_path, "token", TOKEN),
        "takes": ["financial_posting"],
    }
    with_site: dict[str, str | None] = {**FAST_ENV, "EXCHANGE_GAP_TIMEOUT": "0.01"}
    with_site.update(_env({**_marketplaces(tmp_path), "site": shop}))
    assert env["EXCHANGE_CHANNELS"] != with_site["EXCHANGE_CHANNELS"]
    stage(engine, [posting_row("DOC-1", 3, amount="300.00")])
    ran = cli("run", "--until-idle", "--channel", "site", db=db_url, env=with_site)
    assert ran.returncode == 0, describe(ran)
    assert site.applied_versions("financial_posting", "DOC-1") == []
    return with_site, _message_ids(engine)


def _site_versions(engine: Engine) -> list[int]:
    with transaction(engine) as connection:
        return sorted(
            connection.execute(
                select(deliveries.c.version)
                .join(channels, channels.c.id == deliveries.c.channel_id)
                .where(channels.c.name == "site")
            )
            .scalars()
            .all()
        )


def test_a_seed_from_a_later_kept_version_is_refused_naming_the_first(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path, site: SiteSimulator
) -> None:
    """Review 32k (second pass), finding 1 (contract 3 strict order, contract 1 nothing lost):
    ``channels seed site --from <DOC-1 v2>`` would give the site v2 without the kept v1 (v1
    then cancelled stale, a posting lost): it is refused, exit 2, one line naming the command
    from v1 (in Russian too), nothing created; the seed it names delivers DOC-1 1, 2, 3 and
    DOC-2 1 in order, nothing stale, nothing left kept."""
    with_site, ids = _kept_behind(cli, db_url, engine, tmp_path, site)
    first, second = ids[("DOC-1", 1)], ids[("DOC-1", 2)]
    skipping = cli("channels", "seed", "site", "--from", second, db=db_url, env=with_site)
    assert skipping.returncode == 2, describe(skipping)
    assert skipping.stderr.strip().count("\n") == 0, describe(skipping)
    assert f"exchange channels seed site --from {first}" in skipping.stderr, describe(skipping)
    russian = {**with_site, "EXCHANGE_LANG": "ru"}
    skipping_ru = cli("channels", "seed", "site", "--from", second, db=db_url, env=russian)
    assert skipping_ru.returncode == 2, describe(skipping_ru)
    assert "would skip" not in skipping_ru.stderr, describe(skipping_ru)
    assert f"exchange channels seed site --from {first}" in skipping_ru.stderr
    assert _site_versions(engine) == [3]

    seeded = cli("channels", "seed", "site", "--from", first, db=db_url, env=with_site)
    assert seeded.returncode == 0, describe(seeded)
    assert "channel site: 3 deliveries created" in seeded.stdout, describe(seeded)
    assert "still kept" not in seeded.stdout, describe(seeded)
    ran = cli("run", "--until-idle", "--channel", "site", db=db_url, env=with_site)
    assert ran.returncode == 0, describe(ran)
    assert site.applied_versions("financial_posting", "DOC-1") == [1, 2, 3]
    assert site.applied_versions("financial_posting", "DOC-2") == [1]
    assert not _no_channel_causes(cli, db_url, with_site)


def test_find_and_history_advise_the_seed_from_the_first_kept_version(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path, site: SiteSimulator
) -> None:
    """Review 32k (second pass), finding 1: ``find`` lists DOC-1 v2 (newest first) and its
    advice is what an operator runs: it names the seed from DOC-1 v1, the first kept version
    of its aggregate, never from v2 itself (``--json``'s ``seed_from``); ``history`` of v2
    the same."""
    with_site, ids = _kept_behind(cli, db_url, engine, tmp_path, site)
    first, second = ids[("DOC-1", 1)], ids[("DOC-1", 2)]
    found = run_json(cli, "find", "DOC-1", "--json", db=db_url, env=with_site)
    assert {r["message_id"]: r["seed_from"] for r in found if r["delivered_nowhere"]} == {
        first: first,
        second: first,
    }
    shown = " ".join(cli("find", "DOC-1", db=db_url, env=with_site).stdout.split())
    assert f"--from {second}" not in shown and f"--from {first}" in shown, shown
    told = " ".join(cli("history", second, db=db_url, env=with_site).stdout.split())
    assert f"exchange channels seed NAME --from {first}" in told, told


def test_a_version_waiting_behind_kept_ones_is_no_gap_and_says_the_seed(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path, site: SiteSimulator
) -> None:
    """Review 32k (second pass), finding 2: DOC-1 v3 waits behind versions that arrived and
    are kept on no channel. ``status`` says so with the seed's command (in Russian too), not
    "a gap" / «пропуск» (an operator would ask 1C to resend v1), and counts no gap cause."""
    with_site, ids = _kept_behind(cli, db_url, engine, tmp_path, site)
    first = ids[("DOC-1", 1)]
    figures = run_json(cli, "status", "--json", db=db_url, env=with_site, code=1)
    assert "gap" not in figures["needs_person_causes"], figures["needs_person_causes"]
    held = [b for b in figures["blocked"] if b["aggregate"] == "DOC-1"]
    assert [(b["held_by"], b["seed_from"]) for b in held] == [("kept", first)], held
    assert held[0]["cause"] == (
        f"waiting for version 1, kept on no channel; {ids[('DOC-1', 3)]} is next: "
        f"exchange channels seed site --from {first}"
    )
    wide = {**with_site, "EXCHANGE_LANG": "ru", "COLUMNS": "400"}
    russian = cli("status", db=db_url, env=wide)
    words = " ".join(russian.stdout.split())
    assert "пропуск" not in words and "kept on no channel" not in words, describe(russian)
    assert f"exchange channels seed site --from {first}" in words, describe(russian)


def test_the_plain_seed_says_the_kept_postings_and_the_command(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path, site: SiteSimulator
) -> None:
    """Review 32k (second pass), finding 2: ``channels seed site`` without ``--from`` creates
    nothing for postings accepted before the site was registered; it says they are still
    kept on no channel, with the command that gives them (never a bare «0 created»)."""
    with_site, ids = _kept_behind(cli, db_url, engine, tmp_path, site)
    first = ids[("DOC-1", 1)]
    plain = cli("channels", "seed", "site", db=db_url, env=with_site)
    assert plain.returncode == 0, describe(plain)
    assert (
        f"3 messages of kind financial_posting are still kept on no channel (accepted before "
        f"a channel took that kind): exchange channels seed site --from {first}"
    ) in " ".join(plain.stdout.split()), describe(plain)
    russian = cli("channels", "seed", "site", db=db_url, env={**with_site, "EXCHANGE_LANG": "ru"})
    said = " ".join(russian.stdout.split())
    assert "still kept" not in said and f"exchange channels seed site --from {first}" in said


def test_a_seeds_history_row_is_said_in_russian(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path, site: SiteSimulator
) -> None:
    """Review 32k (second pass), finding 3: ``history`` under EXCHANGE_LANG=ru says the seed's
    row through the catalogue, not «seeded to channel site» in English."""
    with_site, ids = _kept_behind(cli, db_url, engine, tmp_path, site)
    first = ids[("DOC-1", 1)]
    seeded = cli("channels", "seed", "site", "--from", first, db=db_url, env=with_site)
    assert seeded.returncode == 0, describe(seeded)
    story = cli("history", first, db=db_url, env={**with_site, "EXCHANGE_LANG": "ru"})
    assert story.returncode == 0, describe(story)
    assert "seeded to channel" not in story.stdout, describe(story)
    assert "передано каналу site" in " ".join(story.stdout.split()), describe(story)
