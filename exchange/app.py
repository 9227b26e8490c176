"""The composition root: settings -> engines, target, clock, metrics -> worker.

The one place that builds them: nothing is built at import time, and the CLI (and the demo,
the tests, the bench) call these once per command. Nor is anything heavy imported at import
time: each function imports what it builds (the database, the shop's client, the web server),
so that a command that needs none of them (``exchange --help``, ``exchange config``) starts
without paying for them, as every operator's command and every process a test starts does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from exchange.domain.clock import Clock, Monotonic, SystemClock
from exchange.errors import ConfigurationError, OperatorError
from exchange.settings import Settings, onec_folder
from exchange.settings.marketplaces import MARKETPLACE_TARGETS
from exchange.words import channel_subject, channels_named

if TYPE_CHECKING:
    import httpx
    from aiohttp import web
    from sqlalchemy import Engine

    from exchange.intake.sources.common import Source
    from exchange.ops.metrics import MetricsServer
    from exchange.report.notice import Notifier
    from exchange.settings import Channel as SettingsChannel
    from exchange.targets.base import Target
    from exchange.targets.bitrix.target import BitrixTarget
    from exchange.targets.ozon.target import OzonTarget
    from exchange.targets.shop_api.client import SiteClient
    from exchange.targets.wildberries.target import WildberriesTarget
    from exchange.targets.woocommerce.target import WooCommerceTarget
    from exchange.web.config import WebConfig
    from exchange.worker import Worker

log = logging.getLogger(__name__)


def engines(settings: Settings, *, check_migrated: bool = True) -> tuple[Engine, Engine | None]:
    from exchange.db.engine import make_engine
    from exchange.db.migrate import ensure_current

    engine = make_engine(settings.database_url)
    staging_engine = (
        make_engine(settings.staging_url)
        if settings.staging_url and settings.staging_url != settings.database_url
        else None
    )
    if check_migrated:
        ensure_current(engine)
    return engine, staging_engine


def register_channels(settings: Settings, engine: Engine) -> list[str]:
    """Contract 13, "The registry": the channels of this configuration registered (a new one
    added, a changed ``takes`` written), as ``migrate``, ``run``, ``serve``, ``check`` and
    ``channels seed`` do when they read it. The names newly registered; ``ChannelConflict``
    (one line, exit 2) when a configured name is registered with another target."""
    from exchange.db.channels import register

    return register(engine, settings.channels_in_force(), SystemClock().now())


def site_client(
    settings: Settings, transport: httpx.AsyncBaseTransport | None = None
) -> SiteClient:
    from exchange.targets.shop_api.client import SiteClient

    if not settings.site_url:
        raise ConfigurationError("EXCHANGE_SITE_URL is not set: the site to deliver to is required")
    return SiteClient(
        settings.site_url,
        settings.token(),
        timeout=settings.http_timeout,
        concurrency=settings.concurrency,
        transport=transport,
        verify=settings.site_tls(),
    )


def target(
    settings: Settings,
    transport: httpx.AsyncBaseTransport | None = None,
    *,
    engine: Engine | None = None,
    clock: Clock | None = None,
    channel: str | None = None,
    channel_id: int | None = None,
) -> Target:
    """The shop to deliver to (contract 10: ``api``, the shop API of section 5; ``woocommerce``;
    ``bitrix``; contract 14: ``wildberries``). ``engine``: where the WooCommerce target keeps
    SKU ids and the Wildberries target its catalogue map and tasks (in memory without);
    ``channel``: the channel's name (the one channel's: the target's); ``channel_id``: the
    registry's row the worker serves, fixed at its start (``worker``)."""
    if settings.target == "wildberries":
        return wildberries_target(settings, transport, engine=engine, channel=channel)
    if settings.target == "woocommerce":
        return woocommerce_target(settings, transport, engine=engine, clock=clock)
    if settings.target == "bitrix":
        return bitrix_target(settings, transport, engine=engine, clock=clock)
    if settings.target == "rabbitmq":
        return rabbitmq_target(settings)
    if settings.target == "ozon":
        return ozon_target(settings, transport, engine=engine, clock=clock, channel_id=channel_id)
    if settings.target == "yandex-market":
        return yandex_market_target(settings, transport, engine=engine, clock=clock)
    if settings.target in MARKETPLACE_TARGETS:
        # Contract 14: each marketplace's target is built above, when its module is there.
        raise ConfigurationError(f"the {settings.target} target is not part of this build")
    from exchange.targets.shop_api.target import ShopApiTarget

    return ShopApiTarget(
        site_client(settings, transport),
        batch_size=settings.site_batch_size,
        token=settings.token,
    )


def channel_said(settings: Settings) -> str | None:
    """What a marketplace channel's words call it (English, as details are written): "channel
    ozon (Ozon)" where EXCHANGE_CHANNELS names it, else the marketplace, "Ozon" (review words34:
    never the target's code). The rule of the worker's busy words (``words.channel_subject``)."""
    name = settings._channel_name
    return channel_subject(name, settings.target, "en", named=channels_named(name is not None, 0))


def wildberries_target(
    settings: Settings,
    transport: httpx.AsyncBaseTransport | None = None,
    *,
    engine: Engine | None = None,
    channel: str | None = None,
) -> WildberriesTarget:
    from exchange.db.articles import DbArticles
    from exchange.db.sent_times import DbSentTimes
    from exchange.db.target_lock import DbHold
    from exchange.db.wb_store import DbWbStore
    from exchange.targets.marketplace.articles import NO_ARTICLES
    from exchange.targets.marketplace.holders import NO_HOLDERS
    from exchange.targets.wildberries.store import MemoryWbStore, WbStore
    from exchange.targets.wildberries.target import WildberriesTarget
    from exchange.targets.wildberries.token import account_key

    def token() -> str | None:
        return settings.secret("wb_token")

    if not token():
        raise ConfigurationError(
            settings.said(
                "EXCHANGE_WB_TOKEN_FILE is not set or empty: Wildberries needs the "
                "seller's API token"
            )
        )
    store: WbStore = (
        DbWbStore(engine, channel or settings.target, settings._channel_name)
        if engine is not None
        else MemoryWbStore()
    )
    return WildberriesTarget(
        settings.wb_api_url,
        token,
        store,
        price_types=dict(settings.wb_price_types),
        rounding=settings.rounding,
        currency=settings.currency,
        sku_source=settings.sku_source,
        articles=DbArticles(engine) if engine is not None else NO_ARTICLES,
        # The SKUs any worker already gave an article: one SKU a WB good (sku_source=article).
        holders=DbSentTimes(engine, settings._channel_name) if engine is not None else NO_HOLDERS,
        catalogue_refresh=settings.wb_catalogue_refresh,
        timeout=settings.http_timeout,
        transport=transport,
        refused_wait=settings.retry_max_delay,
        channel_said=channel_said(settings),
        # The Prices limit is the seller account's (§2.3): a 4xx charged as ten or a 429 one
        # worker heard, every worker of the token waits out (``Budget.shared_with``).
        account_hold=(lambda key: DbHold(engine, f"wb budget:{account_key(key)}"))
        if engine is not None
        else None,
    )


def rabbitmq_target(settings: Settings) -> Target:
    """Contract 12's target. The client is imported here, so that an installation without the
    ``brokers`` extra runs the other targets without it."""
    try:
        from exchange.targets.rabbitmq.target import RabbitMqTarget
    except ImportError as exc:
        raise ConfigurationError(
            "EXCHANGE_TARGET=rabbitmq needs the brokers extra "
            f"(pip install 'exchange[brokers]'): {exc.name} is missing"
        ) from None
    return RabbitMqTarget(
        lambda: settings.rabbitmq_url or "",
        settings.rabbitmq_exchange or "",
        timeout=settings.http_timeout,
    )


def woocommerce_target(
    settings: Settings,
    transport: httpx.AsyncBaseTransport | None = None,
    *,
    engine: Engine | None = None,
    clock: Clock | None = None,
) -> WooCommerceTarget:
    from exchange.db.sku_ids import DbSkuIds
    from exchange.targets.woocommerce.ids import MemorySkuIds, SkuIds
    from exchange.targets.woocommerce.target import WooCommerceTarget

    if not settings.woo_url:
        raise ConfigurationError("EXCHANGE_WOO_URL is not set: the WooCommerce shop is required")

    def credentials() -> tuple[str | None, str | None]:
        return settings.secret("woo_key"), settings.secret("woo_secret")

    key, secret = credentials()
    if not key or not secret:
        raise ConfigurationError(
            "EXCHANGE_WOO_KEY and EXCHANGE_WOO_SECRET (or their _FILE twins) are required"
        )
    ids: SkuIds = (
        DbSkuIds(engine, f"woocommerce {settings.woo_url}", clock or SystemClock())
        if engine is not None
        else MemorySkuIds()
    )
    return WooCommerceTarget(
        settings.woo_url,
        credentials,
        ids,
        price_fields=dict(settings.woo_price_fields),
        timeout=settings.http_timeout,
        transport=transport,
        verify=settings.site_tls(),
        auth_setting=settings.woo_auth,
    )


def yandex_market_target(
    settings: Settings,
    transport: httpx.AsyncBaseTransport | None = None,
    *,
    engine: Engine | None = None,
    clock: Clock | None = None,
) -> Target:
    """Contract 14's Yandex Market: each offer carries every mapped price type the channel
    knows (``KnownPrices``, this channel's), since Yandex drops a discount an update leaves
    out; the articles under ``sku_source = article``. ``clock``: the worker's (a test's fake
    one), the one intake dates its messages by: a price's wait for 1C's next package is
    counted on it."""
    from exchange.db.articles import DbArticles
    from exchange.db.known_prices import DbKnownPrices
    from exchange.db.sent_times import DbSentTimes
    from exchange.db.target_lock import DbHold, DbLeft, DbSlots
    from exchange.targets.marketplace.articles import NO_ARTICLES
    from exchange.targets.marketplace.hold import NO_SHARED_SLOTS
    from exchange.targets.prices import NO_KNOWN_PRICES, NOTHING_WAITING, KnownPrices
    from exchange.targets.yandex_market.target import (
        ACCEPTED,
        NO_EARLIER_SENDS,
        NOT_APPLIED,
        SENT,
        YandexMarketTarget,
    )

    if settings.ym_business_id is None:
        raise ConfigurationError("the yandex-market target needs EXCHANGE_YM_BUSINESS_ID")
    if not settings.secret("ym_api_key"):
        raise ConfigurationError(
            "the yandex-market target needs EXCHANGE_YM_API_KEY or EXCHANGE_YM_API_KEY_FILE"
        )
    channel = settings._channel_name
    known: KnownPrices = (
        DbKnownPrices(
            engine,
            channel,
            awaiting_receipt=ACCEPTED,
            in_flight=False,
            in_doubt=True,
            doubt_receipts=(SENT, NOT_APPLIED),
            replaced=True,
        )
        if engine is not None
        else NO_KNOWN_PRICES
    )
    return YandexMarketTarget(
        settings.ym_api_url,
        settings.ym_business_id,
        lambda: settings.secret("ym_api_key"),
        price_types=dict(settings.ym_price_types),
        currency=settings.currency,
        sku_source=settings.sku_source,
        rounding=settings.rounding,
        pair_settle=settings.pair_settle,
        articles=DbArticles(engine) if engine is not None else NO_ARTICLES,
        offers_per_minute=settings.ym_offers_per_minute,
        parallel=settings.ym_parallel,
        apply_timeout=settings.ym_apply_timeout,
        timeout=settings.http_timeout,
        # What Yandex holds of the other price types: delivered, withheld, or accepted and
        # awaiting its read-back, also once superseded by a version that never went (contract
        # 14: never an older one over them), or may hold: a
        # send whose answer never came (``ym-sent:``, a timeout, a crash in flight), or one
        # accepted and not shown within ym_apply_timeout (``ym-not-applied``: accepted is not
        # applied, it may still land, research §3.4/§3.5), waiting for its retry, quarantined
        # or superseded, the newest of them; one in flight is this batch's own (one item per
        # SKU in flight), carried as new or refused unsent.
        known=known,
        # What is still to be given (new, delayed): an offer that cannot go without it waits.
        waiting=known if isinstance(known, DbKnownPrices) else NOTHING_WAITING,
        # The channel's earlier updates of a SKU that may still land, whichever worker sent
        # them: a read-back that cannot tell them from this one counts after ym_apply_timeout.
        earlier=DbSentTimes(engine, channel) if engine is not None else NO_EARLIER_SENDS,
        channel_said=channel_said(settings),
        # A method's budget is the business's (§3.3): spent as any of its workers heard
        # Yandex say it, every one waits until the moment named (a ``target_locks`` row).
        spent=(lambda method: DbHold(engine, f"ym spent:{settings.ym_business_id}:{method}"))
        if engine is not None
        else None,
        # What its answers say is left of it until the window's end, each request of any
        # worker taking its offers from that count first.
        left=(lambda method: DbLeft(engine, f"ym left:{settings.ym_business_id}:{method}"))
        if engine is not None
        else None,
        # ``ym_parallel`` is the business's too (§3.3): every worker's requests together take
        # one of its places (``target_locks`` rows), never one more at once.
        slots=DbSlots(
            engine,
            f"ym parallel:{settings.ym_business_id}",
            settings.ym_parallel,
            clock or SystemClock(),
        )
        if engine is not None
        else NO_SHARED_SLOTS,
        transport=transport,
        verify=settings.site_tls(),
        now=(clock or SystemClock()).now,
    )


def bitrix_target(
    settings: Settings,
    transport: httpx.AsyncBaseTransport | None = None,
    *,
    engine: Engine | None = None,
    clock: Clock | None = None,
) -> BitrixTarget:
    from exchange.db.known_prices import DbKnownPrices
    from exchange.db.target_lock import DbLock
    from exchange.targets.bitrix.target import BitrixTarget
    from exchange.targets.prices import NO_KNOWN_PRICES

    missing = [
        variable
        for variable, value in (
            ("EXCHANGE_BITRIX_URL", settings.bitrix_url),
            ("EXCHANGE_BITRIX_USER", settings.bitrix_user),
            ("EXCHANGE_BITRIX_CATALOG_ID", settings.bitrix_catalog_id),
        )
        if not value
    ]
    if missing:
        raise ConfigurationError(f"the bitrix target needs {', '.join(missing)}")
    if not settings.secret("bitrix_password"):
        raise ConfigurationError(
            "the bitrix target needs EXCHANGE_BITRIX_PASSWORD or EXCHANGE_BITRIX_PASSWORD_FILE"
        )
    return BitrixTarget(
        settings.bitrix_url or "",
        settings.bitrix_user or "",
        lambda: settings.secret("bitrix_password"),
        catalog_id=settings.bitrix_catalog_id or "",
        price_types=dict(settings.bitrix_price_types),
        max_import_steps=settings.bitrix_max_import_steps,
        timeout=settings.http_timeout,
        transport=transport,
        verify=settings.site_tls(),
        # One exchange at a time with the site across every worker sharing this database.
        lock=DbLock(
            engine, f"bitrix {settings.bitrix_url}", settings.worker_id, clock or SystemClock()
        )
        if engine is not None
        else None,
        # Each offer carries every mapped price type the service knows (contract 10).
        known=DbKnownPrices(engine) if engine is not None else NO_KNOWN_PRICES,
    )


def ozon_target(
    settings: Settings,
    transport: httpx.AsyncBaseTransport | None = None,
    *,
    engine: Engine | None = None,
    clock: Clock | None = None,
    channel_id: int | None = None,
) -> OzonTarget:
    """Contract 14's ``ozon``: with a database, the channel's known and delivered prices, 1C's
    articles and the sends of the last hour are read from it (``exchange check`` and the tests
    go without). ``clock``: the worker's, for the hourly limit (a test's fake one).
    ``channel_id``: the channel row the worker serves, fixed at its start: its rows, never a
    channel added again under its name after a drop while this worker runs (review ozon 35:
    the name then named the new row, and a lost send was written on none)."""
    from exchange.db.articles import DbArticles
    from exchange.db.known_prices import DbKnownPrices
    from exchange.db.sent_times import DbSentTimes
    from exchange.db.target_lock import DbHold, DbLock
    from exchange.targets.marketplace.articles import NO_ARTICLES
    from exchange.targets.marketplace.hold import NO_SHARED_HOLD, NO_SHARED_TURN
    from exchange.targets.marketplace.holders import NO_HOLDERS
    from exchange.targets.ozon.hours import NO_SENT_TIMES
    from exchange.targets.ozon.target import OzonTarget
    from exchange.targets.prices import NO_KNOWN_PRICES, NOTHING_WAITING, KnownPrices

    if not settings.ozon_client_id:
        raise ConfigurationError("the ozon target needs ozon_client_id (EXCHANGE_OZON_CLIENT_ID)")
    if not settings.secret("ozon_api_key"):
        raise ConfigurationError(
            "the ozon target needs ozon_api_key_file (EXCHANGE_OZON_API_KEY_FILE): a file "
            "holding the Seller API key"
        )
    # The worker's channel row; else EXCHANGE_CHANNELS's channel by name; the one channel of
    # the one-target settings: None (every channel's, which is that one's).
    channel: int | str | None = channel_id if channel_id is not None else settings._channel_name
    known: KnownPrices = (
        DbKnownPrices(engine, channel, in_flight=False, in_doubt=True, replaced=True)
        if engine is not None
        else NO_KNOWN_PRICES
    )
    return OzonTarget(
        settings.ozon_api_url,
        settings.ozon_client_id,
        lambda: settings.secret("ozon_api_key"),
        price_types=dict(settings.ozon_price_types),
        currency=settings.currency,
        sku_source=settings.sku_source,
        rounding=settings.rounding,
        pair_settle=settings.pair_settle,
        timeout=settings.http_timeout,
        transport=transport,
        verify=settings.site_tls(),
        # The newest version of each price type Ozon may hold: delivered, or in doubt (a send
        # whose result is unknown, waiting for its retry or quarantined); in flight is this
        # batch's own (one item per SKU in flight): carried as new, or refused unsent, when
        # the item carries the version known before it.
        known=known,
        # What is still to be given (new, delayed): an item that cannot go without it waits.
        waiting=known if isinstance(known, DbKnownPrices) else NOTHING_WAITING,
        delivered=DbKnownPrices(engine, channel, delivered_only=True)
        if engine is not None
        else NO_KNOWN_PRICES,
        articles=DbArticles(engine) if engine is not None else NO_ARTICLES,
        holders=DbSentTimes(engine, channel) if engine is not None else NO_HOLDERS,
        sent=DbSentTimes(engine, channel) if engine is not None else NO_SENT_TIMES,
        # "Circle is open" is the account's (§1.3): every worker of the Client-Id waits it out.
        circle=DbHold(engine, f"ozon circle:{settings.ozon_client_id}")
        if engine is not None
        else NO_SHARED_HOLD,
        # Its end is every worker's moment alike: one request goes first (each worker's own).
        circle_turn=DbLock(
            engine,
            f"ozon circle turn:{settings.ozon_client_id}",
            f"{settings.worker_id}:{uuid.uuid4().hex[:12]}",
            clock or SystemClock(),
        )
        if engine is not None
        else NO_SHARED_TURN,
        clock=(lambda: clock.now().timestamp()) if clock is not None else time.time,
        # A refused key is asked about again once per retry_max_delay, as WB's and YM's
        # read-only pauses try a write (review 32).
        probe_every=settings.retry_max_delay,
        channel_said=channel_said(settings),
    )


def worker(
    settings: Settings,
    engine: Engine,
    staging_engine: Engine | None = None,
    *,
    clock: Clock | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    rng: random.Random | None = None,
    monotonic: Monotonic | None = None,
    channel: str | None = None,
) -> Worker:
    """A loop for every channel of the settings (contract 13), each with its own target
    built from its channel's settings; ``channel``: that one only (``run --channel``).
    ``clock`` and ``monotonic``: the real ones unless a test gives fakes (``FakeClock``,
    ``FakeMonotonic``); ``transport``: every target's."""
    from exchange.worker import Worker
    from exchange.worker.process import Channel

    chosen = chosen_channels(settings, channel)
    served = [
        Channel(
            found.name if found.explicit else None,
            found.settings,
            target(
                found.settings,
                transport,
                engine=engine,
                clock=clock,
                channel=found.name,
                channel_id=channel_id,
            ),
            channel_id,
        )
        for found, channel_id in zip(chosen, registered_ids(engine, chosen), strict=True)
    ]
    return Worker(
        settings,
        engine,
        served,
        clock or SystemClock(),
        staging_engine=staging_engine,
        rng=rng,
        source=source(settings, engine, staging_engine),
        monotonic=monotonic,
    )


def chosen_channels(settings: Settings, name: str | None) -> list[SettingsChannel]:
    """The configured channels a worker delivers to: every one, or the one named (``run
    --channel NAME``; an unknown name is a ConfigurationError naming the configured ones)."""
    found = settings.channels_in_force()
    if name is None:
        return found
    chosen = [channel for channel in found if channel.name == name]
    if not chosen:
        names = ", ".join(channel.name for channel in found)
        raise ConfigurationError(f"no channel {name} is configured here (configured: {names})")
    return chosen


def registered_ids(engine: Engine, chosen: list[SettingsChannel]) -> list[int]:
    """The registry's id of each channel a worker delivers to, read once (``run`` registers
    the configured ones first): a named channel's registered channel not dropped, or, without
    EXCHANGE_CHANNELS, the one channel. A name not registered is a ConfigurationError."""
    from exchange.db.channels import in_use
    from exchange.db.engine import transaction
    from exchange.queue.deliveries import one_channel

    ids: list[int] = []
    with transaction(engine, read_only=True) as connection:
        for found in chosen:
            if not found.explicit:
                ids.append(one_channel(connection))
                continue
            registered = in_use(connection, found.name)
            if registered is None:
                raise ConfigurationError(
                    f"channel {found.name} is not registered (exchange migrate registers it)"
                )
            ids.append(registered.id)
    return ids


def source(settings: Settings, engine: Engine, staging_engine: Engine | None) -> Source | None:
    """The broker ``exchange run`` also takes intents from (contract 12), or None."""
    from exchange.intake import sources

    return sources.build(settings, engine, staging_engine)


@contextmanager
def serving(settings: Settings, worker: Worker, engine: Engine) -> Iterator[MetricsServer | None]:
    """For ``exchange run``: metrics on while the block runs, when a port is configured."""
    if settings.metrics_port is None:
        yield None
        return
    from exchange.ops.metrics import Health, MetricsServer, PrometheusMetrics

    # Under EXCHANGE_CHANNELS the delivery series carry the channel (contract 13); without
    # it the one loop has no name and every series keeps today's labels.
    metrics = PrometheusMetrics(channels=[loop.channel for loop in worker.loops if loop.channel])
    health = Health(metrics, engine, poll_interval=settings.poll_interval)
    server = MetricsServer(metrics, health, host=settings.metrics_host, port=settings.metrics_port)
    with server:
        previous, worker.metrics = worker.metrics, metrics
        log.info(
            "metrics on http://%s:%d/metrics, health on /healthz",
            settings.metrics_host,
            server.port,
        )
        try:
            yield server
        finally:
            worker.metrics = previous


def notifier(
    settings: Settings,
    engine: Engine,
    clock: Clock | None = None,
    staging_engine: Engine | None = None,
) -> Notifier | None:
    """The operators' notifications, or None when no channel is configured (off: nothing is
    read or written for them)."""
    from exchange.report import notice

    return notice.notifier(settings, engine, clock or SystemClock(), staging_engine=staging_engine)


def _notifications(
    watcher: Notifier, every: float
) -> Callable[[web.Application], AsyncIterator[None]]:
    """For ``exchange serve``: a notification step every ``every`` seconds while it serves. The
    one process that sees delivery stop when no worker runs at all."""

    from exchange.runner import notify_step

    async def context(app: web.Application) -> AsyncIterator[None]:
        async def loop() -> None:
            while True:
                await notify_step(watcher)
                await asyncio.sleep(every)

        task = asyncio.create_task(loop())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return context


def web_config(settings: Settings) -> WebConfig:
    """What ``exchange serve`` needs; secrets read here, once (their ``_FILE`` twins win)."""
    from exchange.web.config import WebConfig

    return WebConfig(
        kinds=dict(settings.kinds),
        exchange_dir=onec_folder(settings),
        onec_user=settings.onec_user or None,
        onec_password=settings.secret("onec_password"),
        intake_token=settings.secret("intake_token"),
        secret_key=settings.secret("http_secret_key"),
        sku_mode=settings.onec_sku,
        price_types=dict(settings.onec_price_types),
        file_limit=settings.onec_file_limit,
        max_file_bytes=settings.onec_max_file_bytes,
        zip=settings.onec_zip,
        max_zip_ratio=settings.onec_max_zip_ratio,
        reader_processes=settings.onec_reader_processes,
        intake_max_items=settings.intake_max_items,
        bulk_limit=settings.bulk_limit,
        report_mask_fields=tuple(settings.report_mask_fields),
        report_secrets=tuple(s for s in settings.secrets() if s),
        report_lang=settings.report_lang,
        display_tz=settings.display_tz,
        live_within=settings.live_within,
        behind_proxy=settings.http_behind_proxy,
        public_url=settings.public_url,
        withheld_target=lambda name: target(named_channel(settings, name)),
        # EXCHANGE_CHANNELS's names (cause codes name their channel), else None: every
        # registered channel counts as configured and codes stay bare (contract 13).
        channels=tuple(c.name for c in settings.channels_in_force() if c.explicit) or None,
    )


def named_channel(settings: Settings, name: str | None) -> Settings:
    """The named channel's settings; with one channel the name may be left out."""
    found = settings.channels_in_force()
    if name is None:
        if len(found) > 1:
            names = ", ".join(channel.name for channel in found)
            raise OperatorError(f"--channel is required: this installation has {names}")
        return found[0].settings
    for channel in found:
        if channel.name == name:
            return channel.settings
    names = ", ".join(channel.name for channel in found)
    raise OperatorError(f"no channel {name} is configured here (configured: {names})")


def http_server(
    settings: Settings,
    engine: Engine,
    *,
    staging_engine: Engine | None = None,
    started: Callable[[int], Awaitable[None] | None] | None = None,
    stop: asyncio.Event | None = None,
) -> Awaitable[None]:
    """``exchange serve``: refuses plain HTTP off loopback (contract 9), then listens. With
    ``EXCHANGE_STAGING_URL`` naming another database, intents are staged there
    (``staging_engine``, made from the settings when not given)."""
    from exchange.db.engine import make_engine
    from exchange.web.files import FileRefused, private_folder
    from exchange.web.server import build_app, serve, tls_context

    refusal = settings.http_plain_refusal()
    if refusal is not None:
        raise ConfigurationError(refusal)
    tls = None
    if settings.http_tls_cert is not None and settings.http_tls_key is not None:
        try:
            tls = tls_context(str(settings.http_tls_cert), str(settings.http_tls_key))
        except (OSError, ValueError) as exc:
            raise ConfigurationError(
                f"EXCHANGE_HTTP_TLS_CERT/EXCHANGE_HTTP_TLS_KEY cannot be used: {exc}"
            ) from None
    config = web_config(settings)
    if not config.onec_open:
        log.warning("1C exchange closed: EXCHANGE_1C_USER and EXCHANGE_1C_PASSWORD are not set")
    else:
        try:
            private_folder(config.exchange_dir)
        except (FileRefused, OSError) as exc:
            raise ConfigurationError(f"EXCHANGE_1C_DIR cannot be used: {exc}") from None
    if not config.intake_token:
        log.warning("JSON intake closed: EXCHANGE_INTAKE_TOKEN is not set")
    made = None
    if (
        staging_engine is None
        and settings.staging_url
        and settings.staging_url != settings.database_url
    ):
        staging_engine = made = make_engine(settings.staging_url)
    app = build_app(config, engine, staging_engine)
    watcher = notifier(settings, engine, SystemClock())
    if watcher is not None:
        app.cleanup_ctx.append(_notifications(watcher, settings.poll_interval))
    served = serve(
        app, host=settings.http_host, port=settings.http_port, tls=tls, started=started, stop=stop
    )
    if made is None:
        return served

    async def serving_then_dispose() -> None:
        try:
            await served
        finally:
            made.dispose()

    return serving_then_dispose()
