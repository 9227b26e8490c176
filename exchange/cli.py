"""The command line: parse, call, print. No decisions live here.

Expected failures (bad configuration, unreachable database, an operator request that cannot
be done) print one line ``error: …`` on stderr and exit 2; bad options exit 2 via Click.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from exchange import bootstrap, report
from exchange.clock import SystemClock, ensure_utc
from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import current_revision, upgrade
from exchange.errors import ExchangeError
from exchange.quarantine import Filters, cancel, list_quarantined, retry
from exchange.runner import run_forever, run_once, run_until_idle
from exchange.settings import Policy, Settings, load_settings, safe_url
from exchange.status import biography, status

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
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)
log = logging.getLogger("exchange")


@contextmanager
def _guard() -> Iterator[None]:
    try:
        yield
    except ExchangeError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        raise typer.Exit(2) from None


def _settings(ctx: typer.Context, **overrides: Any) -> Settings:
    settings = load_settings(ctx.obj, **overrides)
    logging.basicConfig(
        level=settings.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Alembic narrates every connection at INFO; `migrate` says what it did itself.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    return settings


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
) -> Filters:
    return Filters(kind, aggregate, reason, _parse_time(since), _parse_time(until))


KindOpt = Annotated[str | None, typer.Option("--kind", help="Only this kind.")]
AggregateOpt = Annotated[str | None, typer.Option("--aggregate", help="Only this aggregate.")]
ReasonOpt = Annotated[str | None, typer.Option("--reason", help="Only this reason.")]
SinceOpt = Annotated[str | None, typer.Option("--since", help="Quarantined at or after (ISO).")]
UntilOpt = Annotated[str | None, typer.Option("--until", help="Quarantined before (ISO).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")]


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
        if settings.staging_url and settings.staging_url != settings.database_url:
            upgrade(make_engine(settings.staging_url))
        out.print(
            f"migrated {safe_url(settings.database_url)} to revision {current_revision(engine)}",
            markup=False,
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
) -> None:
    """The scheduled service: take, coalesce, lease, deliver, record; until stopped."""
    if once and until_idle:
        raise typer.BadParameter("--once and --until-idle exclude each other")
    if max_seconds is not None and not until_idle:
        raise typer.BadParameter("--max-seconds goes with --until-idle")
    with _guard():
        settings = _settings(ctx)
        engine, staging_engine = bootstrap.engines(settings)
        worker = bootstrap.worker(settings, engine, staging_engine)

        async def main() -> int:
            try:
                if once:
                    return await run_once(worker)
                if until_idle:
                    return await run_until_idle(
                        worker, max_seconds=max_seconds, poll_interval=settings.poll_interval
                    )
                return await run_forever(worker, poll_interval=settings.poll_interval)
            finally:
                await worker.site.aclose()

        code = asyncio.run(main())
    raise typer.Exit(code)


@app.command("status")
def status_command(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Counts by state and the four queue figures."""
    with _guard():
        settings = _settings(ctx)
        engine, _ = bootstrap.engines(settings)
        with transaction(engine, read_only=True) as connection:
            figures = status(connection, SystemClock().now(), settings.kinds_with(Policy.STRICT))
    if as_json:
        print(json.dumps(figures.as_json(), ensure_ascii=False))
        return
    table = Table(title="messages by state")
    table.add_column("state")
    table.add_column("count", justify="right")
    for state, count in figures.counts.items():
        table.add_row(state, str(count))
    out.print(table)
    age = figures.oldest_undelivered_age_s
    out.print(f"new messages: {figures.new_messages}", markup=False)
    out.print(f"oldest undelivered: {'-' if age is None else f'{age:.0f} s'}", markup=False)
    out.print(f"error share (15 min): {figures.error_share:.1%}", markup=False)
    out.print(f"delivery rate: {figures.delivery_rate_per_min:.1f}/min", markup=False)
    for worker in figures.workers:
        paused = f", PAUSED: {worker['paused']}" if worker["paused"] else ""
        out.print(
            f"worker {worker['worker_id']}: breaker {worker['breaker']}{paused}, "
            f"last seen {worker['heartbeat_at']}",
            markup=False,
        )
    for blocked in figures.blocked:
        out.print(
            f"blocked {blocked['kind']} {blocked['aggregate']}: {blocked['cause']}", markup=False
        )


@app.command()
def history(ctx: typer.Context, message_id: str, as_json: JsonOpt = False) -> None:
    """The message's biography."""
    with _guard():
        settings = _settings(ctx)
        engine, _ = bootstrap.engines(settings)
        with transaction(engine, read_only=True) as connection:
            bio = biography(connection, message_id)
    if as_json:
        print(json.dumps(bio, ensure_ascii=False))
        return
    m = bio["message"]
    out.print(
        f"{m['message_id']}  {m['kind']} {m['aggregate']} v{m['version']}  "
        f"state={m['state']} reason={m['reason']} attempts={m['attempts']}",
        markup=False,
    )
    table = Table()
    for column in ("at", "event", "from", "to", "worker", "attempt", "http", "detail"):
        table.add_column(column)
    for e in bio["history"]:
        detail = e["detail"] or ""
        if e["operator"]:
            detail += f" [{e['operator']}: {e['note'] or ''}]"
        table.add_row(
            e["at"],
            e["event"],
            e["from"] or "",
            e["to"] or "",
            e["worker"] or "",
            str(e["attempt"] or ""),
            str(e["http_status"] or e["error_class"] or ""),
            detail,
        )
    out.print(table)


@quarantine_app.command("list")
def quarantine_list(
    ctx: typer.Context,
    kind: KindOpt = None,
    aggregate: AggregateOpt = None,
    reason: ReasonOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What waits for a person."""
    filters = _filters(kind, aggregate, reason, since, until)
    with _guard():
        settings = _settings(ctx)
        engine, _ = bootstrap.engines(settings)
        with transaction(engine, read_only=True) as connection:
            rows = list_quarantined(connection, filters)
    if as_json:
        print(json.dumps(rows, ensure_ascii=False))
        return
    table = Table(title=f"quarantine: {len(rows)}")
    for column in ("message_id", "kind", "aggregate", "v", "reason", "tries", "last error"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["message_id"],
            row["kind"],
            row["aggregate"],
            str(row["version"]),
            row["reason"],
            str(row["attempts"]),
            (row["last_error"] or "")[:80],
        )
    out.print(table)


@quarantine_app.command("export")
def quarantine_export(
    ctx: typer.Context,
    output: Annotated[Path, typer.Option("--output", help="The file to write.", dir_okay=False)],
    fmt: Annotated[str, typer.Option("--format", help="json (csv, xlsx, html: coming)")] = "json",
    kind: KindOpt = None,
    aggregate: AggregateOpt = None,
    reason: ReasonOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
) -> None:
    """The operators' report, written to a file."""
    if fmt != "json":
        raise typer.BadParameter(
            f"format {fmt!r} is not available in this version: use json", param_hint="--format"
        )
    filters = _filters(kind, aggregate, reason, since, until)
    with _guard():
        settings = _settings(ctx)
        engine, _ = bootstrap.engines(settings)
        with transaction(engine, read_only=True) as connection:
            data = report.collect(connection, filters, SystemClock().now())
        try:
            report.export_json(data, output)
        except OSError as exc:
            raise ExchangeError(f"cannot write {output}: {exc.strerror}") from None
    out.print(f"wrote {data['summary']['total']} entries to {output}", markup=False)


@quarantine_app.command("retry")
def quarantine_retry(
    ctx: typer.Context,
    message_ids: Annotated[list[str] | None, typer.Argument(help="Messages to replay.")] = None,
    kind: KindOpt = None,
    aggregate: AggregateOpt = None,
    reason: ReasonOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show, change nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm a bulk retry.")] = False,
    operator: Annotated[str | None, typer.Option(help="Who acts (default: OS user).")] = None,
    note: Annotated[str | None, typer.Option(help="Why.")] = None,
) -> None:
    """Replay with the same message_id (ids, or filters with --yes)."""
    ids = message_ids or []
    filters = _filters(kind, aggregate, reason, since, until)
    if ids and filters.any():
        raise typer.BadParameter("give message ids or filters, not both")
    if not ids and not filters.any():
        raise typer.BadParameter(
            "a bulk retry needs at least one filter "
            "(--kind, --aggregate, --reason, --since, --until)"
        )
    bulk = not ids
    dry = dry_run or (bulk and not yes)
    with _guard():
        settings = _settings(ctx)
        engine, _ = bootstrap.engines(settings)
        with transaction(engine) as connection:
            result = retry(
                connection,
                ids,
                filters,
                operator=operator or _os_user(),
                note=note,
                now=SystemClock().now(),
                dry_run=dry,
            )
    verb = "would retry" if dry else "retried"
    out.print(f"{verb} {len(result.touched)} message(s)", markup=False)
    for message_id in result.touched:
        out.print(f"  {message_id}", markup=False)
    for message_id, why in result.skipped:
        out.print(f"  skipped {message_id}: {why}", markup=False)
    if bulk and not yes and not dry_run:
        out.print("nothing changed: add --yes to retry these", markup=False)


@quarantine_app.command("cancel")
def quarantine_cancel(
    ctx: typer.Context,
    message_ids: Annotated[list[str], typer.Argument(help="Messages to end.")],
    note: Annotated[str, typer.Option(help="Why (required, kept for audit).")],
    operator: Annotated[str | None, typer.Option(help="Who acts (default: OS user).")] = None,
) -> None:
    """End quarantined messages for good, kept for audit."""
    with _guard():
        settings = _settings(ctx)
        engine, _ = bootstrap.engines(settings)
        with transaction(engine) as connection:
            result = cancel(
                connection,
                message_ids,
                operator=operator or _os_user(),
                note=note,
                now=SystemClock().now(),
                strict=settings.kinds_with(Policy.STRICT),
            )
    out.print(f"cancelled {len(result.touched)} message(s)", markup=False)


@app.command()
def demo(
    directory: Annotated[
        Path,
        typer.Option(
            "--dir", help="Where the demo writes its database and report.", file_okay=False
        ),
    ] = Path("exchange-demo"),
    skus: Annotated[int, typer.Option(min=1, max=100_000, help="How many SKUs.")] = 1000,
) -> None:
    """The main job on the embedded default, nothing to configure.

    A fresh SQLite file, a simulated site with realistic faults, staged data, a run to idle,
    a summary and a quarantine report.
    """
    from exchange.demo import run_demo

    with _guard():
        code = run_demo(directory, skus=skus, console=out)
    raise typer.Exit(code)


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
