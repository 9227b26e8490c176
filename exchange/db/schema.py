"""The schema, as typed SQLAlchemy models. Created and upgraded only by Alembic migrations.

Times are stored as UTC without a zone (``UTCDateTime``) on both databases, so that the
staging table keeps the contract's ``TIMESTAMP (UTC)`` and values read back are aware.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    Numeric,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
)
from sqlalchemy import text as sa_text
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.sql.expression import FunctionElement

from exchange.domain.clock import ensure_utc
from exchange.domain.search_key import search_key_or_none

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite makes a rowid alias (and AUTOINCREMENT) only of a column typed exactly INTEGER.
BigId = BigInteger().with_variant(Integer(), "sqlite")
SmallId = SmallInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """An aware UTC datetime stored as a naive UTC TIMESTAMP."""

    impl = DateTime(timezone=False)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return ensure_utc(value).replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):  # a value 1C wrote by hand into SQLite
            value = datetime.fromisoformat(value)
        return ensure_utc(value)


class utcnow(FunctionElement[datetime]):
    """The database's current UTC time as a zone-less timestamp (for server defaults)."""

    type = DateTime()
    inherit_cache = True


@compiles(utcnow, "postgresql")
def _utcnow_pg(element: utcnow, compiler: Any, **kw: Any) -> str:
    return "(now() AT TIME ZONE 'utc')"


@compiles(utcnow, "sqlite")
def _utcnow_sqlite(element: utcnow, compiler: Any, **kw: Any) -> str:
    return "CURRENT_TIMESTAMP"


def _folded(column: str) -> Any:
    """A column default: ``column``'s value of the same INSERT, case-folded (``search_key``);
    None where the INSERT gives none. An INSERT … SELECT runs no Python and names the key
    itself (intake/staging_store.py)."""

    def default(context: Any) -> str | None:
        return search_key_or_none(context.get_current_parameters().get(column))

    return default


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class StagingIntent(Base):
    """What 1C writes (contract 1). 1C only INSERTs; the service only sets ``taken_at``."""

    __tablename__ = "staging_intents"
    __table_args__ = (
        Index(
            "ix_staging_intents_untaken",
            "id",
            sqlite_where=sa_text("taken_at IS NULL"),
            postgresql_where=sa_text("taken_at IS NULL"),
        ),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, Identity(always=True), primary_key=True)
    kind: Mapped[str] = mapped_column(String(64))
    aggregate: Mapped[str] = mapped_column(String(200))
    aggregate_version: Mapped[int] = mapped_column(BigInteger)
    payload: Mapped[str] = mapped_column(Text)
    schema_version: Mapped[str] = mapped_column(String(32), server_default="1")
    source_ref: Mapped[str | None] = mapped_column(String(500))
    # The product's name, for people (contract 1): optional, never sent to a shop; a staging
    # table 1C created without it works without names (migration 0016).
    name: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, server_default=utcnow())
    taken_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Aggregate(Base):
    """One ordered entity per (kind, aggregate): its identity. Its cursor and its lease are
    per channel, in ``channel_aggregates`` (migration 0026 dropped the one channel's copy)."""

    __tablename__ = "aggregates"
    __table_args__ = (
        UniqueConstraint("kind", "aggregate"),
        # ``find`` by the beginning of a SKU, whatever its case (migration 0017).
        Index(
            "ix_aggregates_sku_key", "sku_key", postgresql_ops={"sku_key": "varchar_pattern_ops"}
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(64))
    aggregate: Mapped[str] = mapped_column(String(200))
    # price: the sku and price_type the first accepted version fixed for the aggregate (contract
    # 1, "one aggregate is one price"); kept here, past prune. NULL for other kinds (migration
    # 0003).
    sku: Mapped[str | None] = mapped_column(String(100))
    # ``sku`` case-folded (``search_key``), what ``find`` reads the beginning of (migration
    # 0017). Written with the sku; the column's default folds it for a plain INSERT.
    sku_key: Mapped[str | None] = mapped_column(String(300), default=_folded("sku"))
    price_type: Mapped[str | None] = mapped_column(String(100))


# The states a claim may take a delivery from, as the claim order's partial index says it
# (the claim repeats it word for word: SQLite uses a partial index only for a query that does).
CLAIMABLE_STATES = "state IN ('new', 'delayed', 'in_progress')"


class PriceOwner(Base):
    """One (sku, price type), one aggregate (contract 15): the first ``price`` aggregate the
    service accepted for the pair owns it; a row naming the pair under another aggregate is
    ``invalid-contract``. The primary key decides between two intakes at once (migration
    0019); kept past prune, as the aggregate's own sku and price type are."""

    __tablename__ = "price_owners"

    sku: Mapped[str] = mapped_column(String(100), primary_key=True)
    price_type: Mapped[str] = mapped_column(String(100), primary_key=True)
    aggregate: Mapped[str] = mapped_column(String(200))


# The messages ``ix_messages_kept_nowhere`` holds (``db.channels.is_kept`` repeats it in the
# queries: SQLite reads a partial index only then).
KEPT_NOWHERE = "kept_nowhere IS NOT NULL"


class Message(Base):
    """A message to the site, or a quarantine record of a rejected staging row."""

    __tablename__ = "messages"
    __table_args__ = (
        # The rejected records' lists by state, in the order of since when each is in its
        # state (``ops.quarantine.page_of``, migration 0019): a page is a walk of this. Only
        # a record has a state (migration 0026): on SQLite only the records are in it
        # (migration 0028), intake writes no entry for an accepted message.
        Index(
            "ix_messages_state_updated_at_id",
            "state",
            "updated_at",
            "id",
            sqlite_where=sa_text("state IS NOT NULL"),
        ),
        Index("ix_messages_aggregate_id_version", "aggregate_id", "version"),
        # ``find`` by the beginning of an aggregate, a 1C document, a product name or a
        # message_id (migration 0016): LIKE 'x%' reads a range of these on PostgreSQL through
        # ``varchar_pattern_ops`` (whatever the database's collation); SQLite reads the same
        # range of the plain index through the bounds ``find`` adds beside the LIKE.
        Index(
            "ix_messages_aggregate_key",
            "aggregate_key",
            postgresql_ops={"aggregate_key": "varchar_pattern_ops"},
        ),
        Index(
            "ix_messages_source_ref_prefix",
            "source_ref",
            postgresql_ops={"source_ref": "varchar_pattern_ops"},
        ),
        Index("ix_messages_name_prefix", "name", postgresql_ops={"name": "varchar_pattern_ops"}),
        Index(
            "ix_messages_message_id_key",
            "message_id_key",
            postgresql_ops={"message_id_key": "varchar_pattern_ops"},
        ),
        # The accepted messages kept with no delivery on any channel (``kept_nowhere``, set by
        # intake, cleared by ``channels seed``; migration 0029): ``status`` reads them through
        # this, never every message.
        Index(
            "ix_messages_kept_nowhere",
            "kind",
            "id",
            postgresql_where=sa_text(KEPT_NOWHERE),
            sqlite_where=sa_text(KEPT_NOWHERE),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    message_id: Mapped[str] = mapped_column(String(200), unique=True)
    # NULL for a rejected row (it belongs to no valid aggregate).
    aggregate_id: Mapped[int | None] = mapped_column(ForeignKey("aggregates.id"))
    rejected: Mapped[bool] = mapped_column(Boolean, server_default=false())
    kind: Mapped[str] = mapped_column(String(64))
    aggregate: Mapped[str] = mapped_column(String(200))
    # ``message_id`` and ``aggregate`` case-folded (``search_key``): what ``find`` reads the
    # beginning of (migration 0017). Written with the row; the columns' defaults fold them
    # for a plain INSERT, an INSERT … SELECT names them.
    message_id_key: Mapped[str | None] = mapped_column(String(200), default=_folded("message_id"))
    aggregate_key: Mapped[str | None] = mapped_column(String(600), default=_folded("aggregate"))
    version: Mapped[int] = mapped_column(BigInteger)
    schema_version: Mapped[str] = mapped_column(String(32))
    payload: Mapped[str] = mapped_column(Text)
    source_ref: Mapped[str | None] = mapped_column(String(500))
    # The product's name where the source gave one (contract 1): for people, never sent.
    name: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    staging_id: Mapped[int | None] = mapped_column(BigInteger)
    taken_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # A rejected record's own state, reason and error (no channel receives it); NULL for an
    # accepted message, whose state is its deliveries' (``deliveries``, contract 13; migration
    # 0026 dropped the one channel's copy and the other delivery columns from here).
    state: Mapped[str | None] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(String(64))
    last_error: Mapped[str | None] = mapped_column(Text)
    # When the row last changed: a record's state, or an accepted message's intake.
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # TRUE: intake accepted it while no channel took its kind, so it has no delivery
    # anywhere, until ``channels seed`` gives it one (then NULL); NULL otherwise (migration
    # 0029). A hint ``db.channels.kept_nowhere`` reads through its partial index and checks.
    kept_nowhere: Mapped[bool | None] = mapped_column(Boolean)


class History(Base):
    """A message's biography: one row per transition or event, never rewritten.

    An attempt is one row, written when it ends (answered, released, taken over after its
    lease expired, cancelled or quarantined while its lease had expired): ``worker``,
    ``attempt`` and ``leased_at`` say whose lease it was and when it began, ``at`` when it
    ended. An attempt that ended without an answer (its lease expired: taken over, or
    cancelled or quarantined later) also has ``lease_until``, when its lease ran out: the
    worker held it until then, not until ``at``. Taking a lease writes no row of its own."""

    __tablename__ = "message_history"
    __table_args__ = (Index("ix_message_history_message_pk_id", "message_pk", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    message_pk: Mapped[int] = mapped_column(ForeignKey("messages.id", ondelete="CASCADE"))
    # The channel whose delivery the event is of (contract 13); NULL for intake's own events
    # (``taken``, ``duplicate``, ``rejected``) and a rejected record's (migration 0024).
    channel_id: Mapped[int | None] = mapped_column(SmallInteger)
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    event: Mapped[str] = mapped_column(String(32))
    from_state: Mapped[str | None] = mapped_column(String(16))
    to_state: Mapped[str | None] = mapped_column(String(16))
    worker: Mapped[str | None] = mapped_column(String(200))
    attempt: Mapped[int | None] = mapped_column(Integer)
    leased_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    http_status: Mapped[int | None] = mapped_column(Integer)
    error_class: Mapped[str | None] = mapped_column(String(100))
    detail: Mapped[str | None] = mapped_column(Text)
    delay_s: Mapped[float | None] = mapped_column(Float)
    operator: Mapped[str | None] = mapped_column(String(200))
    note: Mapped[str | None] = mapped_column(Text)


# The columns of one delivery of a message (contract 13): every one of them is per channel,
# unchanged in name and meaning from the one-target ``messages`` (migration 0026 dropped them
# there but the rejected record's own ``state``, ``reason``, ``last_error``, ``updated_at``).
DELIVERY_COLUMNS = (
    "state",
    "reason",
    "superseded_by",
    "attempts",
    "next_try_at",
    "locked_by",
    "locked_until",
    "leased_at",
    "lease_token",
    "last_status",
    "last_error",
    "receipt",
    "claim_rank",
    "waiting_since",
    "updated_at",
)
# An aggregate's cursor and lease, per channel (``channel_aggregates``).
CURSOR_COLUMNS = ("done_version", "lease_token", "lease_owner", "lease_until")
# The claim's order on a channel (``ix_messages_claim_rank``'s channel-first form, which
# migration 0026 dropped): the claim's pick and the take's head rank read it by name on SQLite
# (``queue.order.in_claim_order``).
DELIVERY_CLAIM_ORDER_INDEX = "ix_deliveries_claim_rank"


class Channel(Base):
    """A place that receives messages (contract 13): each channel ever configured, kept.

    A name used again after a drop is a new row, so a dropped channel's deliveries stay
    attached to the old one: ``name`` is unique only among the rows not dropped."""

    __tablename__ = "channels"
    __table_args__ = (
        Index(
            "ix_channels_name",
            "name",
            unique=True,
            sqlite_where=sa_text("dropped_at IS NULL"),
            postgresql_where=sa_text("dropped_at IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(SmallId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(32))  # a-z0-9-
    target: Mapped[str] = mapped_column(String(32))  # api, woocommerce, bitrix, rabbitmq, ...
    added_at: Mapped[datetime] = mapped_column(UTCDateTime)
    dropped_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The highest ``messages.id`` a ``channels seed`` has covered: seeding resumes from it.
    seed_mark: Mapped[int | None] = mapped_column(BigInteger)
    # The kinds it takes, a JSON array (``["price"]``), written by each registration from the
    # configuration (migration 0025): intake fans out from it, whatever the process's own
    # configuration. ``[]``, the default, takes nothing.
    takes: Mapped[str] = mapped_column(Text, server_default="[]")


class Delivery(Base):
    """One message on one channel: the delivery columns of ``messages`` (``DELIVERY_COLUMNS``)
    per channel, with immutable copies of the message's ``aggregate_id``, ``kind`` and
    ``version`` so that the claim, coalescing and the gap check compare versions of one
    aggregate on one channel without a join per row (migration 0024)."""

    __tablename__ = "deliveries"
    __table_args__ = (
        PrimaryKeyConstraint("message_pk", "channel_id"),
        # The claim's order on a channel: only deliveries that may still be claimed.
        Index(
            DELIVERY_CLAIM_ORDER_INDEX,
            "channel_id",
            "claim_rank",
            "message_pk",
            sqlite_where=sa_text(CLAIMABLE_STATES),
            postgresql_where=sa_text(CLAIMABLE_STATES),
        ),
        Index("ix_deliveries_channel_id_state_next_try_at", "channel_id", "state", "next_try_at"),
        # The lists by state, in the order of since when each delivery is in its state.
        Index(
            "ix_deliveries_channel_id_state_updated_at_message_pk",
            "channel_id",
            "state",
            "updated_at",
            "message_pk",
        ),
        # Order and coalescing: the versions of one aggregate on one channel.
        Index(
            "ix_deliveries_aggregate_id_channel_id_version", "aggregate_id", "channel_id", "version"
        ),
        # Renewing a lease finds its deliveries by token; only leased rows are in it.
        Index(
            "ix_deliveries_lease_token",
            "lease_token",
            sqlite_where=sa_text("lease_token IS NOT NULL"),
            postgresql_where=sa_text("lease_token IS NOT NULL"),
        ),
    )

    message_pk: Mapped[int] = mapped_column(ForeignKey("messages.id", ondelete="CASCADE"))
    channel_id: Mapped[int] = mapped_column(ForeignKey("channels.id"))
    aggregate_id: Mapped[int] = mapped_column(ForeignKey("aggregates.id"))
    kind: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(BigInteger)
    state: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(String(64))
    superseded_by: Mapped[str | None] = mapped_column(String(200))
    attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    next_try_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    locked_by: Mapped[str | None] = mapped_column(String(200))
    locked_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    leased_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    lease_token: Mapped[str | None] = mapped_column(String(64))
    last_status: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    receipt: Mapped[str | None] = mapped_column(Text)
    claim_rank: Mapped[int] = mapped_column(BigInteger, server_default="0")
    waiting_since: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ChannelAggregate(Base):
    """An aggregate on one channel: its cursor and its lease (``CURSOR_COLUMNS``), so that one
    message of an aggregate is in flight per channel, a row lock on this row. Strict order on
    a channel starts at ``first_version``, the first version it received (migration 0024)."""

    __tablename__ = "channel_aggregates"
    __table_args__ = (
        PrimaryKeyConstraint("aggregate_id", "channel_id"),
        Index(
            "ix_channel_aggregates_lease_token",
            "lease_token",
            sqlite_where=sa_text("lease_token IS NOT NULL"),
            postgresql_where=sa_text("lease_token IS NOT NULL"),
        ),
        # SQLite: the table is its key's B-tree, a row found by its key in one descent
        # (migration 0028).
        {"sqlite_with_rowid": False},
    )

    aggregate_id: Mapped[int] = mapped_column(ForeignKey("aggregates.id"))
    channel_id: Mapped[int] = mapped_column(ForeignKey("channels.id"))
    done_version: Mapped[int] = mapped_column(BigInteger, server_default="0")
    first_version: Mapped[int] = mapped_column(BigInteger, server_default="1")
    lease_token: Mapped[str | None] = mapped_column(String(64))
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Worker(Base):
    """What each worker last said about itself: shown by ``exchange status``."""

    __tablename__ = "workers"

    worker_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    heartbeat_at: Mapped[datetime] = mapped_column(UTCDateTime)
    paused_reason: Mapped[str | None] = mapped_column(Text)
    breaker_state: Mapped[str] = mapped_column(String(16), server_default="closed")
    breaker_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The site's pace as this worker last saw it (contract 5c), a JSON object: limit, in
    # flight, paced rate, accepted rate, hold, refused in the last minute by cause.
    pace: Mapped[str | None] = mapped_column(Text)
    # When it stopped cleanly (``Worker.retire``): a stopped row is no worker any more (never
    # live, never counted), kept an hour so the dashboard and ``status`` say when it stopped.
    stopped_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Whether its broker source consumes (contract 15), a JSON object: consuming, cause, since,
    # warning; None without a broker source.
    source: Mapped[str | None] = mapped_column(Text)
    # When the site's refusal (401/403) paused this worker: ``status``'s ``pause.since``.
    paused_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Since when the site has not answered at all (refused connections, timeouts), or None
    # while it answers: the dashboard says so instead of «Доставка идёт».
    unreachable_since: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Which pause it is (``domain.pause.PauseCause``): the words every place says it with.
    pause_cause: Mapped[str | None] = mapped_column(String(32))
    # The channel this row is a delivery loop of (``<worker id>/<channel>``, contract 13);
    # NULL for a process's own row (migration 0024).
    channel: Mapped[str | None] = mapped_column(String(32))


class SignInRefusal(Base):
    """Refused sign-ins at one way in (contract 15): ``serve`` writes at most one row a minute
    per ``door`` (``1c``, ``intake``, ``workbench``): how many, the first and the last time,
    never the name or address tried. A row with ``count`` 0 and ``succeeded_at`` marks a
    successful sign-in: refusals before it are no cause any more (``ops/sign_ins.py``)."""

    __tablename__ = "sign_in_refusals"
    # The cause reads the last hour's rows (``ops/sign_ins.refused_lately``, every poll).
    __table_args__ = (Index("ix_sign_in_refusals_last_at", "last_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    door: Mapped[str] = mapped_column(String(16))
    count: Mapped[int] = mapped_column(Integer)
    first_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    succeeded_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class HttpKey(Base):
    """A key ``exchange serve`` generated once and keeps (the cookie signing key when
    EXCHANGE_HTTP_SECRET_KEY is unset): never a constant, the same for every process."""

    __tablename__ = "http_keys"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class CmlExchange(Base):
    """One file of a 1C standard exchange (contract 9a) and its outcome, for operators."""

    __tablename__ = "cml_exchanges"
    __table_args__ = (Index("ix_cml_exchanges_finished_at", "finished_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    exchange: Mapped[str] = mapped_column(String(64))  # the session: one 1C node's exchange
    filename: Mapped[str] = mapped_column(String(500))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # staged | nothing-new | catalogue | nothing | failure | interrupted
    outcome: Mapped[str | None] = mapped_column(String(32))
    detail: Mapped[str | None] = mapped_column(Text)
    intents: Mapped[int] = mapped_column(Integer, server_default="0")
    not_sent: Mapped[int] = mapped_column(Integer, server_default="0")
    version: Mapped[int | None] = mapped_column(BigInteger)
    # Renewed by the serve process while the import runs: an unfinished entry whose heartbeat
    # stopped was left by a process that died, and is closed as ``interrupted`` (migration 0011).
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class CmlPackage(Base):
    """A staged CommerceML package: its content digest (the same file twice stages nothing
    new) and the version its prices got (each greater than every one before)."""

    __tablename__ = "cml_packages"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    version: Mapped[int] = mapped_column(BigInteger)
    source_ref: Mapped[str] = mapped_column(String(500))
    intents: Mapped[int] = mapped_column(Integer)
    staged_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # The highest ``messages.id`` (in the service's database) whose version the package's
    # version is above: the next package reads only the messages above it (migration 0009).
    # NULL for packages staged before the mark existed.
    messages_mark: Mapped[int | None] = mapped_column(BigInteger)
    # The root's ДатаФормирования, normalised (``publish.formed_at``), and the 1C exchange
    # (session) that brought the package: a package formed before one another exchange staged
    # is refused (migration 0023). NULL: none given, or staged before.
    formed_at: Mapped[str | None] = mapped_column(String(32))
    exchange: Mapped[str | None] = mapped_column(String(64))


class CmlPackageRepeat(Base):
    """An aggregate that two offers of one CommerceML package map to (contract 15: two goods
    sharing an Артикул, or one Ид twice): the later offer in document order wins, and
    ``payload`` is its payload; an earlier offer of another price is ``invalid-contract``
    («повтор в пакете»). Written with the package's rows, read by intake (migration 0019)."""

    __tablename__ = "cml_package_repeats"

    version: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    aggregate: Mapped[str] = mapped_column(String(200), primary_key=True)
    payload: Mapped[str] = mapped_column(Text)


class CmlCatalog(Base):
    """What catalogue files said, kept for later exchanges that send offers or prices alone:
    price types (key = Ид, name, currency) and articles (key = product Ид, value = Артикул)."""

    __tablename__ = "cml_catalog"
    __table_args__ = (
        UniqueConstraint("kind", "key"),
        # ``find`` by the beginning of a 1C article, whatever its case, when SKUs are 1C ids
        # (migration 0019): the articles whose ``value_key`` begins with the term.
        Index(
            "ix_cml_catalog_kind_value_key",
            "kind",
            "value_key",
            postgresql_ops={"value_key": "varchar_pattern_ops"},
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16))  # price_type | article
    key: Mapped[str] = mapped_column(String(200))
    name: Mapped[str | None] = mapped_column(String(500))
    value: Mapped[str | None] = mapped_column(String(200))
    # ``key`` and ``value`` case-folded (``search_key``, migration 0019): an article's product
    # (or offer) ``Ид`` as ``aggregates.sku_key`` holds it, and the article itself.
    key_key: Mapped[str | None] = mapped_column(String(600), default=_folded("key"))
    value_key: Mapped[str | None] = mapped_column(String(600), default=_folded("value"))
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Operator(Base):
    """A person who signs in to the workbench (contract 11): a password hash, never the
    password; role ``viewer`` reads, ``operator`` also acts."""

    __tablename__ = "operators"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    role: Mapped[str] = mapped_column(String(16))
    password_hash: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class OperatorSession(Base):
    """A workbench session (issue 21 item 9), checked on every request: sign-out deletes its
    row, and a session whose ``credential`` is no longer its operator's (a password set again,
    the operator removed, or removed and added again) is no session, in every serve process."""

    __tablename__ = "operator_sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # SHA-256 of the token
    name: Mapped[str] = mapped_column(String(100))
    credential: Mapped[str] = mapped_column(String(64))  # SHA-256 of the password hash
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)


class DeliveryPause(Base):
    """Delivery paused by an operator: while the row exists, every worker sends nothing (it
    reads the row each cycle). One row at most (``name`` = ``delivery``); ``name`` is wide
    enough for a channel's own pause, ``delivery:<channel>`` (migration 0024)."""

    __tablename__ = "delivery_pause"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    operator: Mapped[str] = mapped_column(String(100))
    note: Mapped[str] = mapped_column(Text)
    paused_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ShopSkuId(Base):
    """Where a shop keeps a SKU (contract 10, WooCommerce): the product's id, and the parent's
    id for a variation; looked up once, forgotten when the shop says the id is gone."""

    __tablename__ = "shop_sku_ids"
    __table_args__ = (PrimaryKeyConstraint("shop", "sku"),)

    shop: Mapped[str] = mapped_column(String(200))  # the target and its URL
    sku: Mapped[str] = mapped_column(String(200))
    product_id: Mapped[int] = mapped_column(BigInteger)
    parent_id: Mapped[int | None] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class WbNmId(Base):
    """Wildberries (contract 14): a vendor code's ``nmID`` in a channel's catalogue, rebuilt
    whole from WB's list of goods (migration 0027)."""

    __tablename__ = "wb_nm_ids"
    __table_args__ = (PrimaryKeyConstraint("channel", "vendor_code"),)

    channel: Mapped[str] = mapped_column(String(32))
    vendor_code: Mapped[str] = mapped_column(String(200))
    nm_id: Mapped[int] = mapped_column(BigInteger)


class WbCatalogue(Base):
    """When a Wildberries channel's vendor code map was last rebuilt (migration 0027)."""

    __tablename__ = "wb_catalogues"

    channel: Mapped[str] = mapped_column(String(32), primary_key=True)
    refreshed_at: Mapped[datetime] = mapped_column(UTCDateTime)


class WbTask(Base):
    """The Wildberries upload task in flight for a channel's ``nmID``, stored before any poll so
    that a restart polls it instead of uploading again (contract 14, migration 0027)."""

    __tablename__ = "wb_tasks"
    __table_args__ = (PrimaryKeyConstraint("channel", "nm_id"),)

    channel: Mapped[str] = mapped_column(String(32))
    nm_id: Mapped[int] = mapped_column(BigInteger)
    upload_id: Mapped[int] = mapped_column(BigInteger)
    price: Mapped[Decimal] = mapped_column(Numeric(18, 2))
    message_id: Mapped[str] = mapped_column(String(200))
    uploaded_at: Mapped[datetime] = mapped_column(UTCDateTime)
    goods: Mapped[int] = mapped_column(Integer)  # how many goods the upload carried (0: a 208)


class TargetLock(Base):
    """One holder at a time of something a shop allows only once (contract 10: one exchange
    with a 1C-Bitrix site; contract 5c: one worker probing the site's pace), until ``until``
    unless renewed."""

    __tablename__ = "target_locks"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    holder: Mapped[str | None] = mapped_column(String(200))
    until: Mapped[datetime] = mapped_column(UTCDateTime)


class Notification(Base):
    """What the operators were last told (issue 16 item 6): one row (``name`` =
    ``operators``). Whoever moves ``version`` on with a conditional UPDATE (or inserts the
    first row) has the right to send; every other process sharing the database reads the new
    row and waits for the period to pass."""

    __tablename__ = "notifications"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    attempted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    quarantine_mark: Mapped[datetime | None] = mapped_column(UTCDateTime)
    stops: Mapped[str] = mapped_column(String(200))  # Stop values, comma-separated
    sent_by: Mapped[str | None] = mapped_column(String(200))
    outcome: Mapped[str | None] = mapped_column(String(500))  # "sent", or why not (masked)


metadata = Base.metadata
# A declarative model's ``__table__`` is typed as ``FromClause``; it is a ``Table`` here, and
# typing it so lets ``insert()``/``update()`` accept it.
staging: Table = cast(Table, StagingIntent.__table__)
aggregates: Table = cast(Table, Aggregate.__table__)
messages: Table = cast(Table, Message.__table__)
history: Table = cast(Table, History.__table__)
channels: Table = cast(Table, Channel.__table__)
deliveries: Table = cast(Table, Delivery.__table__)
channel_aggregates: Table = cast(Table, ChannelAggregate.__table__)
workers: Table = cast(Table, Worker.__table__)
http_keys: Table = cast(Table, HttpKey.__table__)
cml_exchanges: Table = cast(Table, CmlExchange.__table__)
cml_packages: Table = cast(Table, CmlPackage.__table__)
cml_catalog: Table = cast(Table, CmlCatalog.__table__)
cml_package_repeats: Table = cast(Table, CmlPackageRepeat.__table__)
price_owners: Table = cast(Table, PriceOwner.__table__)
operators: Table = cast(Table, Operator.__table__)
operator_sessions: Table = cast(Table, OperatorSession.__table__)
delivery_pause: Table = cast(Table, DeliveryPause.__table__)
shop_sku_ids: Table = cast(Table, ShopSkuId.__table__)
target_locks: Table = cast(Table, TargetLock.__table__)
wb_nm_ids: Table = cast(Table, WbNmId.__table__)
wb_catalogues: Table = cast(Table, WbCatalogue.__table__)
wb_tasks: Table = cast(Table, WbTask.__table__)
notifications: Table = cast(Table, Notification.__table__)
sign_in_refusals: Table = cast(Table, SignInRefusal.__table__)
