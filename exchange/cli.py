"""The command line: parse, call, print. No decisions live here.

Expected failures (bad configuration, unreachable database, an operator request that cannot
be done) print one line ``error: …`` on stderr and exit 2; bad options exit 2 via Click.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any
from zoneinfo import ZoneInfo

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from sqlalchemy import Engine, make_url

from exchange import app as bootstrap
from exchange import logs
from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import aggregates_beyond_intake, current_revision, upgrade
from exchange.db.wake import how_workers_wake
from exchange.domain.clock import SystemClock, ensure_utc
from exchange.errors import ExchangeError
from exchange.ops import operators
from exchange.ops.attention import attention
from exchange.ops.backlog import backlog, backlog_words
from exchange.ops.exchanges import exchanges_table, onec_exchanges
from exchange.ops.find import check_filters, known_reasons, released_by_cancel
from exchange.ops.find import find as find_messages
from exchange.ops.notify import last_told
from exchange.ops.prioritize import prioritize
from exchange.ops.prune import prune as prune_now
from exchange.ops.quarantine import (
    ActionResult,
    Filters,
    act,
    check_request,
    list_quarantined,
)
from exchange.ops.status import (
    biography,
    human_age,
    quarantine_by_reason,
    source_figures,
    sources_table,
    status,
    tables,
)
from exchange.queue import control
from exchange.report import collect as report
from exchange.runner import notify_step, run_forever, run_once, run_until_idle
from exchange.runner import run as run_event_loop
from exchange.settings import Settings, load_settings, safe_url

app = typer.Typer(
    name="exchange",
    help="Carries price changes and financial postings from 1C to the online shop.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # plain Click errors: one line, no boxes
)
quarantine_app = typer.Typer(
    help="What waits for a person: list, export, retry, cancel.", no_args_is_help=True
)
app.add_typer(quarantine_app, name="quarantine")
operator_app = typer.Typer(
    help="The people who sign in to the workbench (exchange serve, /): add, remove, list.",
    no_args_is_help=True,
)
app.add_typer(operator_app, name="operator")
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)
log = logging.getLogger("exchange")


@contextmanager
def _guard() -> Iterator[None]:
    try:
        yield
    except ExchangeError as exc:
        # The log's filter hides the configuration's secrets; an error is masked the same way.
        err.print(f"error: {logs.redact(str(exc))}", markup=False, highlight=False)
        raise typer.Exit(2) from None


def _settings(ctx: typer.Context, **overrides: Any) -> Settings:
    settings = load_settings(ctx.obj, **overrides)
    logs.configure(settings)
    return settings


def _shown(value: Any) -> Any:
    """Data read back for a person (history, quarantine list) with the configuration's secrets
    masked in every text: rows recorded before a secret was masked at the source, or a secret
    1C or the site put into the data, are not shown in clear either."""
    if isinstance(value, str):
        return logs.redact(value)
    if isinstance(value, dict):
        return {key: _shown(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_shown(inner) for inner in value]
    return value


def _parse_time(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return ensure_utc(datetime.fromisoformat(value))
    except ValueError:
        raise typer.BadParameter(
            f"{value!r} is not an ISO date or time (e.g. 2026-11-30 or 2026-11-30T08:00:00Z)"
        ) from None


def _filters(
    kind: str | None,
    aggregate: str | None,
    reason: str | None,
    since: str | None,
    until: str | None,
    superseded: bool = False,
) -> Filters:
    return Filters(kind, aggregate, reason, _parse_time(since), _parse_time(until), superseded)


KindOpt = Annotated[
    str | None, typer.Option("--kind", help="Only this kind (one of EXCHANGE_KINDS).")
]
AggregateOpt = Annotated[str | None, typer.Option("--aggregate", help="Only this aggregate.")]
ReasonOpt = Annotated[
    str | None,
    typer.Option(
        "--reason",
        help="Only this reason: " + ", ".join(known_reasons()) + ", or http-NNN.",
    ),
]
SinceOpt = Annotated[str | None, typer.Option("--since", help="Quarantined at or after (ISO).")]
UntilOpt = Annotated[str | None, typer.Option("--until", help="Quarantined before (ISO).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")]
SupersededOpt = Annotated[
    bool,
    typer.Option(
        "--superseded",
        help="Only messages a newer delivered version made pointless (superseded after "
        "quarantine).",
    ),
]
LimitOpt = Annotated[
    int | None,
    typer.Option(
        "--limit",
        min=1,
        help="A bulk action may touch up to N messages (default EXCHANGE_BULK_LIMIT).",
    ),
]


@app.callback()
def _main(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", help="A TOML configuration file (or EXCHANGE_CONFIG).", dir_okay=False
        ),
    ] = None,
) -> None:
    ctx.obj = config


@app.command()
def migrate(ctx: typer.Context) -> None:
    """Create or upgrade every table, staging included."""
    with _guard():
        settings = _settings(ctx)
        engine = make_engine(settings.database_url)
        upgrade(engine)
        staging_engine = None
        if settings.staging_url and settings.staging_url != settings.database_url:
            staging_engine = make_engine(settings.staging_url)
            upgrade(staging_engine, staging_notify=False)
        out.print(
            logs.redact(
                f"migrated {safe_url(settings.database_url)} to revision {current_revision(engine)}"
            ),
            markup=False,
        )
        out.print(how_workers_wake(engine, staging_engine, settings.poll_interval), markup=False)
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
                    "(README, 'Versions')"
                ),
                markup=False,
                highlight=False,
            )


@app.command()
def run(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once", help="One cycle, then exit.")] = False,
    until_idle: Annotated[
        bool, typer.Option("--until-idle", help="Cycles until nothing is left to move; exit 0.")
    ] = False,
    max_seconds: Annotated[
        float | None,
        typer.Option(
            "--max-seconds", min=0, help="With --until-idle: give up (exit 3) after this long."
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port",
            min=0,
            max=65535,
            help="Serve Prometheus /metrics and /healthz on this port (or EXCHANGE_METRICS_PORT).",
        ),
    ] = None,
) -> None:
    """The scheduled service: take, coalesce, lease, deliver, record; until stopped."""
    if once and until_idle:
        raise typer.BadParameter("--once and --until-idle exclude each other")
    if max_seconds is not None and not until_idle:
        raise typer.BadParameter("--max-seconds goes with --until-idle")
    with _guard():
        overrides = {} if metrics_port is None else {"metrics_port": metrics_port}
        settings = _settings(ctx, **overrides)
        engine, staging_engine = bootstrap.engines(settings)
        worker = bootstrap.worker(settings, engine, staging_engine)
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
            with transaction(engine, read_only=True) as connection:
                left = status(connection, SystemClock().now(), settings.policies)
                pause = control.operator_pause(connection)
            out.print(_left_line(left, pause, worker.paused_reason), markup=False, highlight=False)
    raise typer.Exit(code)


def _left_line(figures: Any, pause: dict[str, Any] | None, refused: str | None) -> str:
    """The last line of ``run --until-idle``: what is left, so a scheduled task's log says it."""
    counts = figures.counts
    waiting = counts.get("new", 0) + counts.get("delayed", 0)
    parts = [
        f"{waiting} waiting ({figures.held} held behind the quarantine)",
        f"{counts.get('quarantined', 0)} quarantined",
    ]
    if pause is not None:
        parts.append(f"delivery paused by operator {pause['operator']}")
    if refused:
        parts.append(f"delivery paused: the site refused the token ({refused})")
    return "left: " + ", ".join(parts) + " (exchange status tells more)"


@app.command()
def serve(ctx: typer.Context) -> None:
    """The HTTP side: 1C's standard exchange (/1c_exchange.php) and the JSON intake
    (/api/v1/intents); runs until stopped (SIGINT/SIGTERM)."""
    with _guard():
        settings = _settings(ctx)
        engine, staging_engine = bootstrap.engines(settings)
        scheme = "https" if settings.http_tls_cert else "http"

        def started(port: int) -> None:
            log.info("serving on %s://%s:%d", scheme, settings.http_host, port)

        async def main() -> int:
            await bootstrap.http_server(
                settings, engine, staging_engine=staging_engine, started=started
            )
            return 0

        code = run_event_loop(main())
    raise typer.Exit(code)


def _reading_engine(settings: Settings) -> Engine:
    """The service's database for a command that only reads it: a SQLite file that does not
    exist is reported, never created (a read run from another folder would otherwise find an
    empty queue and call it healthy)."""
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite":
        name = url.database or ""
        if name in ("", ":memory:") or not Path(name).is_file():
            where = Path(name).resolve() if name not in ("", ":memory:") else "in memory"
            raise ExchangeError(
                f"no database at {where}: set EXCHANGE_DATABASE_URL to the service's database "
                "(or run from its folder); a read command never creates one, `exchange migrate` "
                "creates a new empty one"
            )
    engine, _ = bootstrap.engines(settings)
    return engine


def _in_zone(iso: str | None, zone: str) -> str:
    """A stored UTC time as a person reads it: in EXCHANGE_DISPLAY_TZ, its zone named."""
    if not iso:
        return ""
    local = datetime.fromisoformat(iso).astimezone(ZoneInfo(zone))
    return local.strftime("%Y-%m-%d %H:%M:%S ") + (local.tzname() or zone)


def _header(settings: Settings) -> None:
    out.print(f"database: {safe_url(settings.database_url)}", markup=False, highlight=False)


@app.command("status")
def status_command(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Counts by state, the queue figures, workers, the quarantine by reason, blocked
    aggregates.

    Exit codes, for monitoring: 0 nothing needs a person; 1 something does (quarantine not
    empty, breaker open, delivery paused, a gap, a failed 1C exchange, work waiting with no
    live worker); 2 bad input or no database.
    """
    with _guard():
        settings = _settings(ctx)
        engine = _reading_engine(settings)
        staging_engine = _reading_staging_engine(settings)
        with (
            transaction(engine, read_only=True) as connection,
            contextlib.ExitStack() as stack,
        ):
            staged = (
                stack.enter_context(transaction(staging_engine, read_only=True))
                if staging_engine is not None
                else None
            )
            now = SystemClock().now()
            figures = status(connection, now, settings.policies)
            waiting = backlog(
                connection,
                now,
                settings.policies,
                timedelta(seconds=settings.live_within),
            )
            onec = onec_exchanges(connection, now)
            pause = control.operator_pause(connection)
            told = last_told(connection)
            found = attention(
                connection, staged, figures, pause, now, settings.policies, settings.live_within
            )
        brokers = asyncio.run(source_figures(bootstrap.source(settings, engine, None)))
    needs = [cause.words() for cause in found.causes]
    if as_json:
        document = {
            "database": safe_url(settings.database_url),
            **figures.as_json(),
            "backlog": waiting,
            "operator_pause": (
                {**pause, "paused_at": pause["paused_at"].isoformat()} if pause else None
            ),
            "needs_person": needs,
            "needs_person_causes": [cause.code for cause in found.causes],
            "intake": found.intake,
            "exchanges_1c": onec,
            "notifications": told,
            "sources": brokers,
        }
        print(json.dumps(document, ensure_ascii=False))
    else:
        _header(settings)
        for table in tables(figures):
            out.print(table)
        out.print(_intake_line(found.intake), markup=False, highlight=False)
        out.print(backlog_words(waiting), markup=False, highlight=False)
        out.print(exchanges_table(onec))
        if brokers:
            out.print(sources_table(brokers))
        if told is not None:
            out.print(
                f"operators last notified {told['attempted_at']} by {told['sent_by']}: "
                f"{told['outcome'] or 'no outcome recorded'}",
                markup=False,
            )
        if needs:
            out.print("needs a person: " + "; ".join(needs), markup=False)
        else:
            out.print("nothing needs a person", markup=False)
    raise typer.Exit(1 if needs else 0)


def _intake_line(taken: dict[str, Any]) -> str:
    if not taken["untaken"]:
        return "received from 1C, not taken yet: 0"
    return (
        f"received from 1C, not taken yet: {taken['untaken']} "
        f"(the oldest {human_age(taken['oldest_untaken_age_s'])} ago)"
    )


def _reading_staging_engine(settings: Settings) -> Engine | None:
    """The staging table's own database when EXCHANGE_STAGING_URL names one, else None."""
    if not settings.staging_url or settings.staging_url == settings.database_url:
        return None
    return make_engine(settings.staging_url)


@app.command("find")
def find_command(
    ctx: typer.Context,
    term: Annotated[
        str, typer.Argument(help="A SKU, an aggregate, a 1C document (source_ref) or an id prefix.")
    ],
    as_json: JsonOpt = False,
) -> None:
    """Any message in any state by SKU, aggregate, 1C document or the start of its id."""
    with _guard():
        settings = _settings(ctx)
        engine = _reading_engine(settings)
        with transaction(engine, read_only=True) as connection:
            rows = _shown(find_messages(connection, term))
    if as_json:
        print(
            json.dumps(
                {"database": safe_url(settings.database_url), "messages": rows},
                ensure_ascii=False,
            )
        )
        return
    _header(settings)
    _print_found(rows)
    if not rows:
        out.print(f"no message matches {term!r}", markup=False)


@app.command("prioritize")
def prioritize_command(
    ctx: typer.Context,
    targets: Annotated[
        list[str],
        typer.Argument(help="message_ids, or price aggregates (their waiting message)."),
    ],
    note: Annotated[str, typer.Option(help="Why (required, kept for audit).")],
    operator: Annotated[str | None, typer.Option(help="Who acts (default: OS user).")] = None,
) -> None:
    """Send these before any backlog: only their place in the claim order changes (never
    Retry-After, the pace, the breaker, a pause or strict order), until each is sent."""
    with _guard():
        settings = _settings(ctx)
        engine, _ = bootstrap.engines(settings)
        with transaction(engine) as connection:
            chosen = prioritize(
                connection,
                targets,
                operator=operator or _os_user(),
                note=note,
                now=SystemClock().now(),
            )
    for message_id in chosen:
        out.print(f"first in line: {message_id}", markup=False, highlight=False, soft_wrap=True)


def _print_found(rows: list[dict[str, Any]]) -> None:
    """Each message's full id on a line of its own (a table would cut it), then its facts."""
    for row in rows:
        out.print(row["message_id"], markup=False, highlight=False, soft_wrap=True)
        out.print(
            f"    {row['state']}  {row['kind']} {row['aggregate']} v{row['version']}  "
            f"reason={row['reason'] or '-'}  1C={row['source_ref'] or '-'}  "
            f"updated {row['updated_at']}",
            markup=False,
            highlight=False,
        )


@app.command()
def history(
    ctx: typer.Context,
    message_id: Annotated[
        str,
        typer.Argument(
            help="A message_id, or what finds one message: SKU, aggregate, 1C document "
            "(source_ref) or an id prefix."
        ),
    ],
    as_json: JsonOpt = False,
) -> None:
    """The message's biography."""
    with _guard():
        settings = _settings(ctx)
        engine = _reading_engine(settings)
        with transaction(engine, read_only=True) as connection:
            found = find_messages(connection, message_id)
            exact = [r for r in found if r["message_id"] == message_id]
            if not exact and len(found) > 1:
                if not as_json:
                    _header(settings)
                _print_found(_shown(found))
                raise ExchangeError(
                    f"{message_id!r} matches {len(found)} messages: give one of the ids above"
                )
            chosen = (
                exact[0]["message_id"]
                if exact
                else (found[0]["message_id"] if found else message_id)
            )
            bio = _shown(biography(connection, chosen))
    if as_json:
        print(json.dumps({"database": safe_url(settings.database_url), **bio}, ensure_ascii=False))
        return
    _header(settings)
    m = bio["message"]
    out.print(
        f"{m['message_id']}  {m['kind']} {m['aggregate']} v{m['version']}  "
        f"state={m['state']} reason={m['reason']} attempts={m['attempts']}",
        markup=False,
    )
    table = Table()
    for column in ("at", "event", "from", "to", "worker", "attempt", "leased", "http", "detail"):
        table.add_column(column, overflow="fold")  # never cut: wrap
    for e in bio["history"]:
        detail = e["detail"] or ""
        if e["operator"]:
            detail += f" [{e['operator']}: {e['note'] or ''}]"
        leased = _in_zone(e["leased_at"], settings.display_tz)
        if e["lease_until"]:  # unanswered (or still in flight): when its lease runs out
            leased += f" – {_in_zone(e['lease_until'], settings.display_tz)}"
        cells = (
            _in_zone(e["at"], settings.display_tz),
            e["event"],
            e["from"] or "",
            e["to"] or "",
            e["worker"] or "",
            str(e["attempt"] or ""),
            leased,
            str(e["http_status"] or e["error_class"] or ""),
            detail,
        )
        # Text, not str: rich would read "[operator: note]" or data from the site as markup.
        table.add_row(*(Text(cell) for cell in cells))
    out.print(table)


def _read_password(confirm: bool = True) -> str:
    """From a prompt on a terminal, else the first line of standard input: never an argument
    (it would stay in the shell's history and in the process list)."""
    if sys.stdin.isatty():
        first = getpass.getpass("password: ")
        if confirm and getpass.getpass("again: ") != first:
            raise ExchangeError("the two passwords differ")
        return first
    return sys.stdin.readline().rstrip("\r\n")


@operator_app.command("add")
def operator_add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The name the operator signs in with.")],
    role: Annotated[
        str, typer.Option("--role", help="viewer (reads) or operator (also acts).")
    ] = "viewer",
) -> None:
    """Add an operator, or set a new password and role for one, which ends every session of
    theirs (password from a prompt or standard input)."""
    with _guard():
        if role not in operators.ROLES:
            raise ExchangeError(f"unknown role {role!r}: viewer or operator")
        settings = _settings(ctx)
        engine, _ = bootstrap.engines(settings)
        password = _read_password()
        with transaction(engine) as connection:
            operators.add(connection, name, role, password, SystemClock().now())
    out.print(f"operator {name} ({role}) saved", markup=False)


@operator_app.command("remove")
def operator_remove(ctx: typer.Context, name: str) -> None:
    """Remove an operator: every session of theirs ends (adding the name again revives none)."""
    with _guard():
        settings = _settings(ctx)
        engine, _ = bootstrap.engines(settings)
        with transaction(engine) as connection:
            operators.remove(connection, name)
    out.print(f"operator {name} removed", markup=False)


@operator_app.command("list")
def operator_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """The operators and their roles (never a password or its hash)."""
    with _guard():
        settings = _settings(ctx)
        engine, _ = bootstrap.engines(settings)
        with transaction(engine, read_only=True) as connection:
            rows = operators.listed(connection)
    if as_json:
        print(json.dumps(rows, ensure_ascii=False))
        return
    table = Table()
    for column in ("name", "role", "added"):
        table.add_column(column)
    for row in rows:
        table.add_row(Text(row["name"]), row["role"], row["created_at"])
    if not rows:
        table.caption = "no operator: add one with exchange operator add NAME --role operator"
    out.print(table)


@quarantine_app.command("list")
def quarantine_list(
    ctx: typer.Context,
    kind: KindOpt = None,
    aggregate: AggregateOpt = None,
    reason: ReasonOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    superseded: SupersededOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """What waits for a person."""
    filters = _filters(kind, aggregate, reason, since, until, superseded)
    with _guard():
        settings = _settings(ctx)
        check_filters(filters.reason, filters.kind, settings.kinds)
        engine = _reading_engine(settings)
        with transaction(engine, read_only=True) as connection:
            rows = _shown(list_quarantined(connection, filters))
            present = (
                quarantine_by_reason(connection, SystemClock().now())
                if not rows and filters.any()
                else {}
            )
    if as_json:
        # Contract 6 promises a list of objects: each names the database it was read from.
        database = safe_url(settings.database_url)
        print(json.dumps([{**row, "database": database} for row in rows], ensure_ascii=False))
        return
    _header(settings)
    if present:
        waiting = ", ".join(f"{r} ({e['count']})" for r, e in present.items())
        err.print(
            f"no quarantined message matches these filters; the quarantine holds: {waiting}",
            markup=False,
            highlight=False,
        )
    table = Table(title=f"quarantine: {len(rows)}")
    for column in ("message_id", "kind", "aggregate", "v", "reason", "tries", "last error"):
        table.add_column(column, overflow="fold")  # never cut: wrap
    for row in rows:
        reason_shown = row["reason"]
        if row["superseded_after_quarantine"]:
            reason_shown += " (superseded after quarantine)"
        # Text, not markup: data with [brackets] (a site's error, a 1C reference) shows as is.
        table.add_row(
            *(
                Text(value)
                for value in (
                    row["message_id"],
                    row["kind"],
                    row["aggregate"],
                    str(row["version"]),
                    reason_shown,
                    str(row["attempts"]),
                    (row["last_error"] or "")[:80],
                )
            )
        )
    out.print(table)


@quarantine_app.command("export")
def quarantine_export(
    ctx: typer.Context,
    output: Annotated[Path, typer.Option("--output", help="The file to write.", dir_okay=False)],
    fmt: Annotated[
        report.ReportFormat | None,
        typer.Option(
            "--format", help="csv, xlsx, html or json (default: the --output suffix, else json)."
        ),
    ] = None,
    lang: Annotated[
        report.Lang | None,
        typer.Option("--lang", help="Labels in ru or en (default EXCHANGE_REPORT_LANG)."),
    ] = None,
    kind: KindOpt = None,
    aggregate: AggregateOpt = None,
    reason: ReasonOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    superseded: SupersededOpt = False,
) -> None:
    """The operators' report, written to a file (atomically)."""
    filters = _filters(kind, aggregate, reason, since, until, superseded)
    chosen = fmt or report.format_for(output)
    with _guard():
        settings = _settings(ctx)
        check_filters(filters.reason, filters.kind, settings.kinds)
        engine = _reading_engine(settings)
        with transaction(engine, read_only=True) as connection:
            data = report.collect(
                connection,
                filters,
                SystemClock().now(),
                mask_fields=settings.report_mask_fields,
                secrets=report.known_secrets(settings),
            )
        try:
            report.export(data, chosen, lang or settings.report_lang, output)
        except OSError as exc:
            raise ExchangeError(f"cannot write {output}: {exc.strerror}") from None
    out.print(f"wrote {len(data.entries)} entries to {output} ({chosen})", markup=False)


@quarantine_app.command("retry")
def quarantine_retry(
    ctx: typer.Context,
    message_ids: Annotated[list[str] | None, typer.Argument(help="Messages to replay.")] = None,
    kind: KindOpt = None,
    aggregate: AggregateOpt = None,
    reason: ReasonOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    superseded: SupersededOpt = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show, change nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm a bulk retry.")] = False,
    limit: LimitOpt = None,
    operator: Annotated[str | None, typer.Option(help="Who acts (default: OS user).")] = None,
    note: Annotated[str | None, typer.Option(help="Why.")] = None,
) -> None:
    """Replay with the same message_id (ids, or filters: shown first, done with --yes)."""
    ids = message_ids or []
    filters = _filters(kind, aggregate, reason, since, until, superseded)
    _operator_action(
        ctx,
        "retry",
        "retried",
        ids,
        filters,
        limit=limit,
        dry_run=dry_run,
        yes=yes,
        operator=operator,
        note=note,
    )


@quarantine_app.command("cancel")
def quarantine_cancel(
    ctx: typer.Context,
    note: Annotated[str, typer.Option(help="Why (required, kept for audit).")],
    message_ids: Annotated[list[str] | None, typer.Argument(help="Messages to end.")] = None,
    kind: KindOpt = None,
    aggregate: AggregateOpt = None,
    reason: ReasonOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    superseded: SupersededOpt = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show, change nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm a bulk cancel.")] = False,
    limit: LimitOpt = None,
    operator: Annotated[str | None, typer.Option(help="Who acts (default: OS user).")] = None,
) -> None:
    """End quarantined messages for good, kept for audit (ids, or filters: shown first, done
    with --yes)."""
    ids = message_ids or []
    filters = _filters(kind, aggregate, reason, since, until, superseded)
    _operator_action(
        ctx,
        "cancel",
        "cancelled",
        ids,
        filters,
        limit=limit,
        dry_run=dry_run,
        yes=yes,
        operator=operator,
        note=note,
    )


def _operator_action(
    ctx: typer.Context,
    action: str,
    done: str,
    ids: list[str],
    filters: Filters,
    *,
    limit: int | None,
    dry_run: bool,
    yes: bool,
    operator: str | None,
    note: str | None,
) -> None:
    """The rules every manual action shares: ids or filters, a bulk one is a dry run until
    --yes, and --limit raises the bulk limit."""
    if ids and limit is not None:
        raise typer.BadParameter(f"--limit goes with filters (a bulk {action}), not message ids")
    bulk = not ids
    dry = dry_run or (bulk and not yes)
    with _guard():
        check_request(ids, filters, action)
        settings = _settings(ctx)
        check_filters(filters.reason, filters.kind, settings.kinds)
        engine, _ = bootstrap.engines(settings)
        with transaction(engine) as connection:
            result = act(
                connection,
                action,
                ids,
                filters,
                operator=operator or _os_user(),
                note=note,
                now=SystemClock().now(),
                kinds=settings.policies,
                dry_run=dry,
                limit=limit or settings.bulk_limit,
            )
            released = (
                released_by_cancel(connection, result.touched, settings.policies)
                if action == "cancel"
                else []
            )
    _print_action(result, action, done, dry=dry, unconfirmed=bulk and not yes and not dry_run)
    for entry in released:
        # The consequence a cancel has beyond the messages it names (strict order).
        out.print(
            f"{'then ' if dry else 'now '}{entry['count']} later version(s) of {entry['kind']} "
            f"{entry['aggregate']} (from v{entry['first_version']}) "
            f"{'will go' if dry else 'go'} out without the cancelled one",
            markup=False,
            highlight=False,
        )


def _print_action(
    result: ActionResult, action: str, done: str, *, dry: bool, unconfirmed: bool
) -> None:
    verb = f"would {action}" if dry else done
    out.print(f"{verb} {len(result.touched)} message(s)", markup=False)
    for message_id in result.touched:
        out.print(f"  {message_id}", markup=False)
    for message_id, why in result.skipped:
        out.print(f"  skipped {message_id}: {why}", markup=False)
    if unconfirmed:
        out.print(f"nothing changed: add --yes to {action} these", markup=False)


@app.command("pause")
def pause_command(
    ctx: typer.Context,
    note: Annotated[str, typer.Option("--note", help="Why, for the other operators.")] = "",
) -> None:
    """Stop delivery for every worker (within one cycle), recorded with the operator."""
    with _guard():
        engine, _ = bootstrap.engines(_settings(ctx))
        with transaction(engine) as connection:
            paused = control.pause(
                connection, operator=_os_user(), note=note, now=SystemClock().now()
            )
    out.print("delivery paused" if paused else "delivery was already paused", markup=False)


@app.command("resume")
def resume_command(ctx: typer.Context) -> None:
    """Restart delivery: an operator's pause ends, and so does a pause no answer of the site
    can end (a key that may read but not write: the next cycle tries a write at once)."""
    with _guard():
        engine, _ = bootstrap.engines(_settings(ctx))
        with transaction(engine) as connection:
            control.resume(connection, operator=_os_user(), now=SystemClock().now())
    out.print("delivery resumed", markup=False)


@app.command()
def prune(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be removed, remove nothing.")
    ] = False,
) -> None:
    """Remove delivered and cancelled messages, taken staging rows and 1C exchange log entries
    older than EXCHANGE_RETENTION_DAYS (never quarantined or pending ones)."""
    with _guard():
        settings = _settings(ctx)
        engine, staging_engine = bootstrap.engines(settings)
        result = prune_now(
            engine,
            staging_engine,
            now=SystemClock().now(),
            retention_days=settings.retention_days,
            dry_run=dry_run,
        )
    out.print(result.describe(), markup=False)


@app.command()
def demo(
    directory: Annotated[
        Path,
        typer.Option(
            "--dir", help="Where the demo writes its database and report.", file_okay=False
        ),
    ] = Path("exchange-demo"),
    skus: Annotated[int, typer.Option(min=1, max=100_000, help="How many SKUs.")] = 1000,
    target: Annotated[
        str,
        typer.Option(
            "--target",
            help="The shop's side: api (the shop API), bitrix or woocommerce (contract 10).",
        ),
    ] = "api",
) -> None:
    """The main job on the embedded default, nothing to configure.

    A fresh SQLite file, a simulated site with realistic faults, staged data, a run to idle,
    a summary and a quarantine report.
    """
    from exchange.dev.demo import run_demo

    if target not in ("api", "bitrix", "woocommerce"):
        out.print(f"--target must be api, bitrix or woocommerce, not {target!r}", markup=False)
        raise typer.Exit(2)
    with _guard():
        if target == "api":
            code = run_demo(directory, skus=skus, console=out)
        else:
            from exchange.dev.demo_targets import run_target_demo

            code = run_target_demo(directory, target=target, skus=min(skus, 500), console=out)
    raise typer.Exit(code)


@app.command()
def notify(
    ctx: typer.Context,
    once: Annotated[
        bool, typer.Option("--once", help="One look, one message at most, then exit.")
    ] = False,
) -> None:
    """Tell the operators (e-mail or Telegram) when the quarantine gained entries or delivery
    stopped, at most once per EXCHANGE_NOTIFY_EVERY for all processes together. `exchange run`
    and `exchange serve` do this by themselves; `notify --once` is for a scheduled task, and
    with serve the only one that sees delivery stop when no worker runs at all.

    Exit codes: 0 sent, or nothing new to tell; 1 the message could not be sent; 2 bad input,
    no database, or no channel configured.
    """
    if not once:
        raise typer.BadParameter(
            "give --once (one look, for a scheduled task); exchange run and exchange serve "
            "notify by themselves"
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
    if result.failed and not result.sent:
        err.print("not sent: " + logs.redact("; ".join(result.failed)), markup=False)
        raise typer.Exit(1)
    if result.sent:
        out.print(f"sent: {result.subject}", markup=False, highlight=False)
        for failure in result.failed or []:
            err.print("not sent: " + logs.redact(failure), markup=False)
    elif result.next_at is not None:
        out.print(
            "told within the last EXCHANGE_NOTIFY_EVERY: the next message goes no sooner than "
            f"{_in_zone(result.next_at.isoformat(), settings.display_tz)}, if something is new",
            markup=False,
        )
    else:
        out.print("nothing new to tell", markup=False)


@app.command()
def check(ctx: typer.Context) -> None:
    """Is this installation ready to run? One line per check: OK, FAIL with the reason, or SKIP.

    Checks, in order: configuration valid (kinds and policies, delays, the financial rule);
    database reachable; database migrated to the latest revision (both again for
    EXCHANGE_STAGING_URL when it is another database); staging table with the contract's
    columns; the target: site reachable and token accepted (GET /api/v1/health; a missing
    EXCHANGE_SITE_URL fails, since run needs it), or for EXCHANGE_TARGET=woocommerce the key's
    read and write permissions, for bitrix checkauth and init; report directory writable
    (skipped when EXCHANGE_REPORT_DIR is not set); the notification channels when configured
    (SMTP connect, STARTTLS, login; Telegram getMe: nothing is sent). Exit 0 when nothing
    failed (a SKIP is not a failure), 1 when a check failed, 2 when the configuration does not
    even load (as every command).
    """
    from exchange.ops.check import Status, fail, run_checks

    try:
        settings = _settings(ctx)
    except ExchangeError as exc:
        # Printed as the first check's line, on stdout with the rest, so the report reads the
        # same whatever fails; the exit code is the one every command uses for configuration.
        out.print(fail("configuration valid", str(exc)).line(), markup=False, highlight=False)
        raise typer.Exit(2) from None
    source = ctx.obj or (Path(p) if (p := os.environ.get("EXCHANGE_CONFIG")) else None)
    results = run_checks(settings, source)
    for result in results:
        # No check puts a secret in a reason; this makes sure none ever can, in any quoting.
        out.print(logs.redact(result.line()), markup=False, highlight=False)
    raise typer.Exit(0 if all(r.status is not Status.FAIL for r in results) else 1)


@app.command("config")
def config_command(
    ctx: typer.Context,
    as_markdown: Annotated[
        bool,
        typer.Option(
            "--markdown",
            help="Print the configuration reference (docs/configuration.md) generated from the "
            "settings model, instead of the values in force.",
        ),
    ] = False,
) -> None:
    """The configuration in force, one variable a line, secrets masked (or --markdown: the
    reference of every key)."""
    from exchange import config_doc

    if as_markdown:
        # Independent of the environment, so the committed reference is the same everywhere.
        sys.stdout.write(config_doc.markdown())
        return
    with _guard():
        settings = _settings(ctx)
    sys.stdout.write(logs.redact(config_doc.effective_text(settings)))


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def config_first(argv: list[str]) -> list[str]:
    """Accept ``--config PATH`` anywhere on the line, as users type it: move it to the front."""
    args = list(argv)
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--config" and i + 1 < len(args):
            return [arg, args[i + 1], *args[:i], *args[i + 2 :]]
        if arg.startswith("--config="):
            return [arg, *args[:i], *args[i + 1 :]]
    return args


def main() -> None:
    app(args=config_first(sys.argv[1:]), prog_name="exchange")
