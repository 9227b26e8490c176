"""Control and tools: pause, resume, prune, demo, notify, check, config."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from sqlalchemy import Connection

from exchange import app as bootstrap
from exchange import logs
from exchange.cli.common import (
    _guard,
    _header,
    _in_zone,
    _os_user,
    _reading_engine,
    _settings,
    app,
    cli_lang,
    err,
    out,
)
from exchange.db.channels import in_use
from exchange.db.engine import make_engine, transaction
from exchange.domain.clock import SystemClock
from exchange.errors import ExchangeError
from exchange.i18n import N_, _
from exchange.ops.prune import prune as prune_now
from exchange.queue import control
from exchange.queue.channels import no_such_channel
from exchange.settings import load_settings, only_channel
from exchange.words import error_words


@app.command(
    "pause",
    help=N_("Stop delivery for every worker (within one cycle), recorded with the operator."),
)
def pause_command(
    ctx: typer.Context,
    note: Annotated[str, typer.Option("--note", help=N_("Why, for the other operators."))] = "",
    channel: Annotated[
        str | None,
        typer.Option("--channel", help=N_("Pause this channel only (default: every channel).")),
    ] = None,
) -> None:
    with _guard():
        settings = _settings(ctx)
        engine, _staging = bootstrap.engines(settings)
        with transaction(engine) as connection:
            _known_channel(connection, channel)
            paused = control.pause(
                connection, operator=_os_user(), note=note, now=SystemClock().now(), channel=channel
            )
    lang = cli_lang()
    if channel is None:
        said = _("delivery paused", lang) if paused else _("delivery was already paused", lang)
    else:  # contract 13: the words name the channel the command touched
        said = (
            _("delivery to channel {channel} paused; the other channels deliver on", lang)
            if paused
            else _("delivery to channel {channel} was already paused", lang)
        ).format(channel=channel)
    out.print(said, markup=False)


@app.command(
    "resume",
    help=N_(
        "Restart delivery: an operator's pause ends, and so does a pause no answer of "
        "the site or marketplace can end (a key that may read but not write: the next "
        "cycle tries a write at once)."
    ),
)
def resume_command(
    ctx: typer.Context,
    note: Annotated[
        str, typer.Option("--note", help=N_("Why, for the other operators (optional)."))
    ] = "",
    channel: Annotated[
        str | None,
        typer.Option(
            "--channel", help=N_("Resume this channel's own pause (default: every channel).")
        ),
    ] = None,
) -> None:
    with _guard():
        engine, _staging = bootstrap.engines(_settings(ctx))
        with transaction(engine) as connection:
            _known_channel(connection, channel)
            control.resume(
                connection,
                operator=_os_user(),
                now=SystemClock().now(),
                channel=channel,
                note=note.strip(),
            )
    lang = cli_lang()
    said = (
        _("delivery resumed", lang)
        if channel is None
        else _("delivery to channel {channel} resumed", lang).format(channel=channel)
    )
    out.print(said, markup=False)


def _known_channel(connection: Connection, channel: str | None) -> None:
    """``--channel NAME`` names a registered channel not dropped (one line, exit 2)."""
    if channel is not None and in_use(connection, channel) is None:
        raise no_such_channel(channel)


@app.command(
    help=N_(
        "Remove delivered and cancelled messages, taken staging rows and 1C exchange "
        "log entries older than EXCHANGE_RETENTION_DAYS (never quarantined or pending "
        "ones, nor a price's latest message or its latest delivered one)."
    )
)
def prune(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help=N_("Count what would be removed, remove nothing."))
    ] = False,
) -> None:
    with _guard():
        settings = _settings(ctx)
        engine, staging_engine = bootstrap.engines(settings)
        result = prune_now(
            engine,
            staging_engine,
            now=SystemClock().now(),
            retention_days=settings.retention_days,
            kinds=settings.policies,
            dry_run=dry_run,
        )
    out.print(result.describe(cli_lang()), markup=False)


@app.command(
    help=N_(
        "The main job on the embedded default, nothing to configure.\n\nA fresh SQLite "
        "file, a simulated site with realistic faults, staged data, a run to idle, a "
        "summary and a quarantine report."
    )
)
def demo(
    ctx: typer.Context,
    directory: Annotated[
        Path,
        typer.Option(
            "--dir", help=N_("Where the demo writes its database and report."), file_okay=False
        ),
    ] = Path("exchange-demo"),
    skus: Annotated[int, typer.Option(min=1, max=100_000, help=N_("How many SKUs."))] = 1000,
    target: Annotated[
        str,
        typer.Option(
            "--target",
            help=N_(
                "The shop's side: api (the shop API), bitrix or woocommerce (contract 10), "
                "rabbitmq (this machine's RabbitMQ, or EXCHANGE_RABBITMQ_URL; contract 12)."
            ),
        ),
    ] = "api",
    catalogue_file: Annotated[
        Path | None,
        typer.Option(
            "--catalogue",
            help=N_(
                "The shop owner's rehearsal: her shop's SKUs, one a line, or WooCommerce's "
                "product CSV export (api and woocommerce). The simulated shop holds those and no "
                "others, and the summary lists the SKUs 1C sends that it lacks."
            ),
            dir_okay=False,
        ),
    ] = None,
    channels: Annotated[
        bool,
        typer.Option(
            "--channels",
            help=N_(
                "One 1C, two shops (contract 13): the site and a WooCommerce shop as two "
                "channels, the site down for a while; the summary shows the other shop was "
                "never held back and the site caught up."
            ),
        ),
    ] = False,
) -> None:
    from exchange.dev.catalogue import CatalogueError, read_catalogue
    from exchange.dev.demo import run_demo

    if channels:
        if target != "api" or catalogue_file is not None:
            _refuse("--channels runs its own shops: it takes neither --target nor --catalogue")
        from exchange.dev.demo_channels import run_channels_demo

        with _guard():
            # The demo's own channels, whatever EXCHANGE_CHANNELS says: the settings are read
            # only to refuse bad ones as every command does.
            load_settings(ctx.obj)
            code = run_channels_demo(directory, skus=min(skus, 500), console=out, lang=cli_lang())
        raise typer.Exit(code)
    if target not in ("api", "bitrix", "woocommerce", "rabbitmq"):
        _refuse(f"--target must be api, bitrix, woocommerce or rabbitmq, not {target!r}")
    catalogue = None
    if catalogue_file is not None:
        if target in ("bitrix", "rabbitmq"):
            # catalog.import.1c skips an offer whose product it lacks without a word
            # (CIBlockCMLImport::ImportElementPrices), and a broker holds no catalogue.
            _refuse(
                f"--catalogue is for --target api or woocommerce: {target} cannot say which "
                "SKUs the shop lacks"
            )
        try:
            catalogue = read_catalogue(catalogue_file)
        except CatalogueError as exc:
            _refuse(str(exc))
        if not catalogue.skus:
            _refuse(f"the catalogue {catalogue_file} names no SKU")
    with _guard():
        # Several channels: not a demo of this version's service. The settings are read, not
        # installed: the service's log handler would tear per-message lines through the bar.
        only_channel(load_settings(ctx.obj))
        if target == "api":
            code = run_demo(directory, skus=skus, console=out, catalogue=catalogue, lang=cli_lang())
        else:
            from exchange.dev.demo_targets import run_target_demo

            code = run_target_demo(
                directory,
                target=target,
                skus=min(skus, 500),
                console=out,
                catalogue=catalogue,
                lang=cli_lang(),
            )
    raise typer.Exit(code)


def _refuse(problem: str) -> NoReturn:
    """Bad input: one line in the person's language (contract 15), exit 2."""
    said = error_words(problem, cli_lang())
    err.print(_("error: {problem}", cli_lang()).format(problem=said), markup=False, highlight=False)
    raise typer.Exit(2)


@app.command(
    help=N_(
        "Tell the operators (e-mail or Telegram) when the quarantine gained entries or "
        "delivery stopped, at most once per EXCHANGE_NOTIFY_EVERY for all processes "
        "together. `exchange run` and `exchange serve` do this by themselves; `notify "
        "--once` is for a scheduled task, and with serve the only one that sees "
        "delivery stop when no worker runs at all.\n\nExit codes: 0 sent, or nothing "
        "new to tell; 1 the message could not be sent; 2 bad input, no database, or no "
        "way (e-mail, Telegram) configured."
    )
)
def notify(
    ctx: typer.Context,
    once: Annotated[
        bool, typer.Option("--once", help=N_("One look, one message at most, then exit."))
    ] = False,
) -> None:
    if not once:
        raise typer.BadParameter(
            _(
                "give --once (one look, for a scheduled task); exchange run and exchange serve "
                "notify by themselves",
                cli_lang(),
            ),
            param_hint="--once",
        )
    with _guard():
        settings = _settings(ctx)
        engine = _reading_engine(settings)
        staging_url = settings.staging_url
        separate = staging_url is not None and staging_url != settings.database_url
        staging_engine = make_engine(staging_url) if staging_url and separate else None
        notifier = bootstrap.notifier(settings, engine, staging_engine=staging_engine)
        if notifier is None:
            raise ExchangeError(
                "notifications are off: set EXCHANGE_NOTIFY_SMTP_HOST (e-mail) or "
                "EXCHANGE_NOTIFY_TELEGRAM_TOKEN (Telegram)"
            )
        result = notifier.step()
    _header(settings)
    lang = cli_lang()
    not_sent = _("not sent: {why}", lang)
    if result.failed and not result.sent:
        err.print(not_sent.format(why=logs.redact("; ".join(result.failed))), markup=False)
        raise typer.Exit(1)
    if result.sent:
        said = _("sent: {subject}", lang).format(subject=result.subject)
        out.print(said, markup=False, highlight=False)
        for failure in result.failed or []:
            err.print(not_sent.format(why=logs.redact(failure)), markup=False)
    elif result.next_at is not None:
        said = _(
            "told within the last EXCHANGE_NOTIFY_EVERY: the next message goes no sooner than "
            "{when}, if something is new",
            lang,
        ).format(when=_in_zone(result.next_at.isoformat(), settings.display_tz, lang))
        out.print(said, markup=False)
    else:
        out.print(_("nothing new to tell", lang), markup=False)


# The check after which ``check`` registers the channels it reads (contract 13).
_MIGRATED = "database migrated to the latest revision"


@app.command(
    help=N_(
        "Is this installation ready to run? One line per check: OK, FAIL with the "
        "reason, or SKIP.\n\nChecks, in order: configuration valid (kinds and "
        "policies, delays, the financial rule); database reachable; database migrated "
        "to the latest revision (both again for EXCHANGE_STAGING_URL when it is "
        "another database); staging table with the contract's columns; the target: "
        "site reachable and token accepted (GET /api/v1/health; a missing "
        "EXCHANGE_SITE_URL fails, since run needs it), or for "
        "EXCHANGE_TARGET=woocommerce the key's read and write permissions, for bitrix "
        "checkauth and init; report directory writable (skipped when "
        "EXCHANGE_REPORT_DIR is not set); the notifications when configured (SMTP "
        "connect, STARTTLS, login; Telegram getMe: nothing is sent). Exit 0 when "
        "nothing failed (a SKIP is not a failure), 1 when a check failed, 2 when the "
        "configuration does not even load (as every command)."
    )
)
def check(ctx: typer.Context) -> None:
    from exchange.ops.check import Status, fail, run_checks

    try:
        settings = _settings(ctx)
    except ExchangeError as exc:
        # Printed as the first check's line, on stdout with the rest, so the report reads the
        # same whatever fails; the exit code is the one every command uses for configuration.
        said = fail("configuration valid", str(exc)).line(cli_lang())
        out.print(said, markup=False, highlight=False)
        raise typer.Exit(2) from None
    source = ctx.obj or (Path(p) if (p := os.environ.get("EXCHANGE_CONFIG")) else None)
    results = run_checks(settings, source)
    for result in results:
        # No check puts a secret in a reason; this makes sure none ever can, in any quoting.
        out.print(logs.redact(result.line(cli_lang())), markup=False, highlight=False)
    if any(r.what == _MIGRATED and r.status is Status.OK for r in results):
        with _guard():  # contract 13: check registers the channels it reads (a conflict: exit 2)
            engine, _staging = bootstrap.engines(settings)
            bootstrap.register_channels(settings, engine)
    raise typer.Exit(0 if all(r.status is not Status.FAIL for r in results) else 1)


@app.command(
    "config",
    help=N_(
        "The configuration in force, one variable a line, secrets masked (or "
        "--markdown: the reference of every key)."
    ),
)
def config_command(
    ctx: typer.Context,
    as_markdown: Annotated[
        bool,
        typer.Option(
            "--markdown",
            help=N_(
                "Print the configuration reference (docs/configuration.md) generated from the "
                "settings model, instead of the values in force."
            ),
        ),
    ] = False,
) -> None:
    from exchange import config_doc

    if as_markdown:
        # Independent of the environment, so the committed reference is the same everywhere.
        sys.stdout.write(config_doc.markdown())
        return
    with _guard():
        settings = _settings(ctx)
    sys.stdout.write(logs.redact(config_doc.effective_text(settings)))
