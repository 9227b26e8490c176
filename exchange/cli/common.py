"""What every command shares: the Typer apps, the consoles, the one-line error guard, the
settings and the filter options."""

from __future__ import annotations

import getpass
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from zoneinfo import ZoneInfo

import typer
from rich.console import Console
from sqlalchemy import Engine, make_url

from exchange import app as bootstrap
from exchange import logs
from exchange.cli.helpwords import WordsGroup
from exchange.db.engine import make_engine
from exchange.domain.clock import ensure_utc, local_time
from exchange.errors import ExchangeError
from exchange.i18n import N_, Lang, _, lang_of_environment, moment
from exchange.ops.quarantine import Filters, filter_time
from exchange.settings import MIN_SECRET_LENGTH, Settings, load_settings, safe_url
from exchange.words import error_words

app = typer.Typer(
    name="exchange",
    cls=WordsGroup,  # the help in the operator's language
    help=N_("Carries price changes and financial postings from 1C to the online shop."),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # plain Click errors: one line, no boxes
)
quarantine_app = typer.Typer(
    help=N_("What waits for a person: list, export, retry, cancel."), no_args_is_help=True
)
app.add_typer(quarantine_app, name="quarantine")
operator_app = typer.Typer(
    help=N_("The people who sign in to the workbench (exchange serve, /): add, remove, list."),
    no_args_is_help=True,
)
app.add_typer(operator_app, name="operator")
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)
log = logging.getLogger("exchange")


def cli_lang() -> Lang:
    """The language of the lines a command prints for a person (contract 15): Russian when
    ``EXCHANGE_LANG=ru`` or the locale is Russian. ``--json``, log lines and codes stay
    English whatever it is."""
    return lang_of_environment()


@contextmanager
def _guard() -> Iterator[None]:
    try:
        yield
    except ExchangeError as exc:
        # The log's filter hides the configuration's secrets; an error is masked the same way.
        said = error_words(logs.redact(str(exc)), cli_lang())
        err.print(
            _("error: {problem}", cli_lang()).format(problem=said), markup=False, highlight=False
        )
        raise typer.Exit(2) from None


def _settings(ctx: typer.Context, **overrides: Any) -> Settings:
    settings = load_settings(ctx.obj, **overrides)
    logs.configure(settings)
    # A message for the person at the console, in their language (contract 15): the settings
    # are read before the log is set up, and a configuration's problem is said as the error
    # line says one, never as a log line.
    for variable in settings.short_secrets():
        said = _(
            "warning: {name} is shorter than {count} characters: ask the shop for a longer one",
            cli_lang(),
        )
        err.print(said.format(name=variable, count=MIN_SECRET_LENGTH), markup=False)
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
        return ensure_utc(filter_time(value))
    except ValueError:
        message = _(
            "{value!r} is not a date or time between the years 1 and 9999 "
            "(e.g. 30.11.2026, 30.11.2026 08:00, 2026-11-30 or 2026-11-30T08:00:00Z)",
            cli_lang(),
        )
        raise typer.BadParameter(message.format(value=value)) from None


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
    str | None, typer.Option("--kind", help=N_("Only this kind (one of EXCHANGE_KINDS)."))
]
AggregateOpt = Annotated[
    str | None,
    typer.Option(
        "--aggregate",
        help=N_("Only aggregates whose name or SKU begins with this (any case), as search finds."),
    ),
]
ReasonOpt = Annotated[
    str | None,
    typer.Option(
        "--reason",
        help=N_("Only this reason: {reasons}, or http-NNN."),
    ),
]
SinceOpt = Annotated[
    str | None, typer.Option("--since", help=N_("Quarantined at or after (30.11.2026 or ISO)."))
]
UntilOpt = Annotated[
    str | None, typer.Option("--until", help=N_("Quarantined before (30.11.2026 or ISO)."))
]
JsonOpt = Annotated[bool, typer.Option("--json", help=N_("One JSON document on stdout."))]
SupersededOpt = Annotated[
    bool,
    typer.Option(
        "--superseded",
        help=N_(
            "Only messages a newer delivered version made pointless (superseded after quarantine)."
        ),
    ),
]
LimitOpt = Annotated[
    int | None,
    typer.Option(
        "--limit",
        min=1,
        help=N_("A bulk action may touch up to N messages (default EXCHANGE_BULK_LIMIT)."),
    ),
]


@app.callback()
def _main(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", help=N_("A TOML configuration file (or EXCHANGE_CONFIG)."), dir_okay=False
        ),
    ] = None,
) -> None:
    ctx.obj = config


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


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
    engine, _staging = bootstrap.engines(settings)
    return engine


def _in_zone(iso: str | None, zone: str, lang: Lang = "en") -> str:
    """A stored UTC time as a person reads it: in EXCHANGE_DISPLAY_TZ, its zone named, to the
    second (``2026-12-05 14:30:00 MSK``; in Russian, CLDR's ``05.12.2026 14:30:00 MSK``)."""
    if not iso:
        return ""
    if lang == "en":
        return local_time(iso, zone)
    try:
        value = ensure_utc(datetime.fromisoformat(iso))
    except ValueError:
        return iso
    where = ZoneInfo(zone)
    return f"{moment(value, lang, where)} {value.astimezone(where).tzname() or zone}"


def _header(settings: Settings) -> None:
    said = _("database: {url}", cli_lang()).format(url=safe_url(settings.database_url))
    out.print(said, markup=False, highlight=False)


def _reading_staging_engine(settings: Settings) -> Engine | None:
    """The staging table's own database when EXCHANGE_STAGING_URL names one, else None."""
    if not settings.staging_url or settings.staging_url == settings.database_url:
        return None
    return make_engine(settings.staging_url)
