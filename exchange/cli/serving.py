"""Starting things: migrate, run (the worker) and serve (1C's exchange, the intake and the
workbench)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from exchange import app as bootstrap
from exchange import logs
from exchange.cli.common import (
    _guard,
    _settings,
    app,
    cli_lang,
    err,
    log,
    out,
)
from exchange.db.channels import kept_nowhere
from exchange.db.engine import make_engine, make_private, transaction
from exchange.db.wake import how_workers_wake
from exchange.domain.clock import SystemClock
from exchange.domain.pause import PauseCause
from exchange.domain.prices import OZON_HOUR
from exchange.i18n import N_, Lang, _, ngettext
from exchange.ops.attention import pause_words, unserved
from exchange.ops.status import (
    status,
)
from exchange.ops.waits import channel_waits
from exchange.queue import control
from exchange.settings import safe_url


@app.command(help=N_("Create or upgrade every table, staging included."))
def migrate(ctx: typer.Context) -> None:
    from exchange.db.migrate import aggregates_beyond_intake, current_revision, upgrade

    with _guard():
        settings = _settings(ctx)
        engine = make_engine(settings.database_url)
        # Without EXCHANGE_CHANNELS the one channel is named after the target (contract 13);
        # with it, an upgraded installation's deliveries become its first channel's.
        first = settings.channels_in_force()[0]
        upgrade(engine, channel=first.name, target=first.target)
        bootstrap.register_channels(settings, engine)
        staging_engine = None
        if settings.staging_url and settings.staging_url != settings.database_url:
            staging_engine = make_engine(settings.staging_url)
            upgrade(staging_engine, staging_notify=False)
        for made in (engine, staging_engine):
            for path in make_private(made) if made is not None else []:
                said = _("{path}: made readable by this user only (0600)", cli_lang())
                out.print(said.format(path=path), markup=False)
        migrated = _("migrated {url} to revision {revision}", cli_lang()).format(
            url=safe_url(settings.database_url), revision=current_revision(engine)
        )
        out.print(logs.redact(migrated), markup=False)
        wake = how_workers_wake(engine, staging_engine, settings.poll_interval, cli_lang())
        out.print(wake, markup=False)
        beyond = aggregates_beyond_intake(engine, staging_engine)
        if beyond:
            shown = ", ".join(beyond[:10]) + (
                f" and {len(beyond) - 10} more" if beyond[10:] else ""
            )
            err.print(
                logs.redact(
                    f"warning: {len(beyond)} aggregate(s) hold a version of 2^62 or more that "
                    f"an older release let in: {shown}; the 1C exchange numbers its packages "
                    "below such versions, so a package's price of these aggregates is stale "
                    "(docs/staging.md, 'Versions')"
                ),
                markup=False,
                highlight=False,
            )


@app.command(
    help=N_("The scheduled service: take, coalesce, lease, deliver, record; until stopped.")
)
def run(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once", help=N_("One cycle, then exit."))] = False,
    until_idle: Annotated[
        bool, typer.Option("--until-idle", help=N_("Cycles until nothing is left to move; exit 0."))
    ] = False,
    max_seconds: Annotated[
        float | None,
        typer.Option(
            "--max-seconds", min=0, help=N_("With --until-idle: give up (exit 3) after this long.")
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port",
            min=0,
            max=65535,
            help=N_(
                "Serve Prometheus /metrics and /healthz on this port (or EXCHANGE_METRICS_PORT)."
            ),
        ),
    ] = None,
    channel: Annotated[
        str | None,
        typer.Option(
            "--channel",
            help=N_("Deliver to this configured channel only (default: every configured one)."),
        ),
    ] = None,
) -> None:
    from exchange.runner import notify_step, run_forever, run_once, run_until_idle
    from exchange.runner import run as run_event_loop

    if once and until_idle:
        raise typer.BadParameter(_("--once and --until-idle exclude each other", cli_lang()))
    if max_seconds is not None and not until_idle:
        raise typer.BadParameter(_("--max-seconds goes with --until-idle", cli_lang()))
    with _guard():
        overrides = {} if metrics_port is None else {"metrics_port": metrics_port}
        settings = _settings(ctx, **overrides)
        bootstrap.chosen_channels(settings, channel)  # an unknown name: one line, exit 2
        engine, staging_engine = bootstrap.engines(settings)
        bootstrap.register_channels(settings, engine)
        worker = bootstrap.worker(settings, engine, staging_engine, channel=channel)
        notifier = bootstrap.notifier(settings, engine, worker.clock, staging_engine)

        async def main() -> int:
            try:
                if once:
                    return await run_once(worker)
                if until_idle:
                    return await run_until_idle(
                        worker, max_seconds=max_seconds, poll_interval=settings.poll_interval
                    )
                return await run_forever(
                    worker, poll_interval=settings.poll_interval, notifier=notifier
                )
            finally:
                await worker.aclose()

        with bootstrap.serving(settings, worker, engine):
            code = run_event_loop(main())
        if notifier is not None and (once or until_idle):
            # A scheduled run tells what it leaves behind (at most once per period), before it
            # retires: while its own row stands, "no worker runs" is not said of this run.
            told = notifier

            async def tell() -> int:
                await notify_step(told)
                return 0

            run_event_loop(tell())
        worker.retire()
        if until_idle:
            said, stranded = left_after_run(engine, settings, worker, cli_lang())
            out.print(said, markup=False, highlight=False)
            if stranded:  # owner 31 item 4: idle, but what waits there waits for a person
                err.print(_stranded_line(stranded, cli_lang()), markup=False, highlight=False)
    raise typer.Exit(code)


def left_after_run(
    engine: Any, settings: Any, worker: Any, lang: Lang = "en"
) -> tuple[str, dict[str, dict[str, Any]]]:
    """``run --until-idle``'s last line (``_left_line``) and the deliveries stranded on
    registered channels no configured channel serves (``_stranded_line``), read now."""
    with transaction(engine, read_only=True) as connection:
        left = status(connection, SystemClock().now(), settings.policies)
        pause = control.operator_pause(connection)
        # kept on no channel: no run delivers them (contract 1: never silent)
        kinds = (kind for kind, _policy in settings.policies.policies)
        nowhere = kept_nowhere(connection, kinds)
        ozon_hour = channel_waits(connection, OZON_HOUR)
        stranded = (  # where the channels are named, as status's cause (contract 13)
            unserved(connection, [c.name for c in settings.channels_in_force()])
            if settings.channels is not None
            else {}
        )
    said = _left_line(
        left,
        pause,
        worker.pause_cause,
        worker.paused_reason,
        lang,
        nowhere=nowhere,
        ozon_hour=ozon_hour,
    )
    return said, stranded


def _left_line(
    figures: Any,
    pause: dict[str, Any] | None,
    cause: str | None,
    refused: str | None,
    lang: Lang = "en",
    *,
    nowhere: dict[str, dict[str, Any]] | None = None,
    ozon_hour: tuple[int, datetime | None] = (0, None),
) -> str:
    """The last line of ``run --until-idle``: what is left, so a scheduled task's log says it;
    ``nowhere``: the messages kept on no channel, by kind (``db.channels.kept_nowhere``);
    ``ozon_hour``: how many of the waiting wait for Ozon's hourly limit, and when the first
    goes (``ops.waits.channel_waits``): a wait that ends by itself, said as one (review
    ozonleft35 item 3: "N waiting" alone read as something stuck)."""
    counts = figures.counts
    waiting = counts.get("new", 0) + counts.get("delayed", 0)
    parts = [
        _("{waiting} waiting ({held} held behind the quarantine)", lang).format(
            waiting=waiting, held=figures.held
        ),
    ]
    held_for_hour, due = ozon_hour
    if held_for_hour:
        at = "?" if due is None else f"{due.astimezone(UTC):%Y-%m-%d %H:%M:%S}"
        parts.append(
            ngettext(
                "{count} of them waits for Ozon's hourly limit of price updates of a product "
                "and goes by itself, the next at {at} UTC",
                "{count} of them wait for Ozon's hourly limit of price updates of a product "
                "and go by themselves, the next at {at} UTC",
                held_for_hour,
                lang,
            ).format(count=held_for_hour, at=at)
        )
    parts += [
        _("{count} quarantined", lang).format(count=counts.get("quarantined", 0)),
    ]
    if counts.get("withheld"):  # contract 13: idle, but a person's to release
        parts.append(
            _("{count} withheld by the channel (exchange withheld release)", lang).format(
                count=counts["withheld"]
            )
        )
    if nowhere:  # no run delivers them: a person configures a channel (exchange status)
        parts.append(
            _("{count} kept on no channel ({kinds})", lang).format(
                count=sum(v["count"] for v in nowhere.values()), kinds=", ".join(nowhere)
            )
        )
    if pause is not None:
        parts.append(
            _("delivery paused by operator {operator}", lang).format(operator=pause["operator"])
        )
    if refused:  # the site's pause, in the words of status (issue 34 item 4)
        parts.append(pause_words(cause or PauseCause.OTHER, refused, lang))
    return _("left: {parts} (exchange status tells more)", lang).format(parts=", ".join(parts))


def _stranded_line(stranded: dict[str, dict[str, Any]], lang: Lang = "en") -> str:
    """``run --until-idle``'s warning: the deliveries left waiting on registered channels no
    configured channel serves (``attention.unserved``: a channel renamed in the settings), which
    no run will ever take."""
    count = sum(channel["count"] for channel in stranded.values())
    return ngettext(
        "warning: {count} of them waits on a registered channel no configured channel "
        "serves ({channels}): no run takes it (exchange status says what to do)",
        "warning: {count} of them wait on a registered channel no configured channel "
        "serves ({channels}): no run takes them (exchange status says what to do)",
        count,
        lang,
    ).format(count=count, channels=", ".join(stranded))


# What ``serve`` names each address it prints (``web.server.addresses``'s first item).
_WAYS_IN = {
    "workbench": N_("workbench"),
    "1C exchange": N_("1C exchange"),
    "JSON intake": N_("JSON intake"),
}


@app.command(
    help=N_(
        "The HTTP side: 1C's standard exchange (/1c_exchange.php), the JSON intake "
        "(/api/v1/intents) and the operators' workbench (/); prints their addresses "
        "when it listens, then runs until stopped (SIGINT/SIGTERM).\n\nWrong passwords "
        "are slowed per serve process: each process keeps its throttle in its own "
        "memory, and a restart forgets it. Several serve processes on one database "
        "give a guesser that many times the attempts: run one, or bound sign-ins at "
        'the proxy (docs/deployment.md, "Wrong passwords"). What reaches the database '
        "of refused sign-ins is a summary, at most one row a minute per way in (how "
        "many, the first and the last time, never the name or the address tried): "
        "exchange status and the workbench show 1C's and the intake's as a cause."
    )
)
def serve(ctx: typer.Context) -> None:
    from exchange.runner import run as run_event_loop
    from exchange.web.server import addresses, public_url_missing

    with _guard():
        # serve delivers nothing itself: the workbench, 1C's exchange and the intake serve
        # every channel (a withheld price's release asks its channel).
        configured = settings = _settings(ctx)
        engine, staging_engine = bootstrap.engines(settings)
        bootstrap.register_channels(configured, engine)
        scheme = "https" if settings.http_tls_cert else "http"
        config = bootstrap.web_config(configured)
        ways = {"onec": config.onec_open, "intake": bool(config.intake_token)}

        def started(port: int) -> None:
            log.info("serving on %s://%s:%d", scheme, settings.http_host, port)
            # On stdout, for the person who started it: where to go next (issue 24 item 13),
            # only the ways in that are open, from EXCHANGE_PUBLIC_URL when set (contract 15).
            public = settings.public_url
            where = addresses(
                scheme=scheme, host=settings.http_host, port=port, public=public, **ways
            )
            lang = cli_lang()
            named = [(_(_WAYS_IN.get(what, what), lang) + ":", address) for what, address in where]
            width = max([13, *(len(what) for what, _address in named)])
            for what, address in named:
                out.print(f"{what:<{width}} {address}", markup=False, highlight=False)
            out.file.flush()
            warning = public_url_missing(public=public, **ways)
            if warning:
                log.warning(warning)

        async def main() -> int:
            await bootstrap.http_server(
                configured, engine, staging_engine=staging_engine, started=started
            )
            return 0

        code = run_event_loop(main())
    raise typer.Exit(code)
