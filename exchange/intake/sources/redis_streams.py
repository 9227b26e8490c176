"""Redis Streams as a way in (contract 12): a stream whose entries carry intents in the field
``intent``, read through a consumer group.

Why redis-py: the client the Redis project maintains for Python; its ``redis.asyncio`` client
runs on the worker's event loop, and it speaks every stream command used here (``XGROUP
CREATE ... MKSTREAM``, ``XREADGROUP``, ``XAUTOCLAIM``, ``XACK``, ``XINFO GROUPS``).

Each worker reads as the consumer named by its worker id. A pull takes, in this order: the
entries this consumer read and never acknowledged (a pull that failed before its ``XACK``),
the entries other consumers left pending for ``EXCHANGE_REDIS_MIN_IDLE`` seconds (a dead
worker's; ``XAUTOCLAIM``), then new entries (``>``); it stages them (``common.take``), commits,
and only then acknowledges. A bad entry is recorded in the quarantine (idempotent on its id)
and acknowledged. The group is created, reading the stream from its start, when missing, and
again when it disappears under a running worker (NOGROUP: ``health`` warns that entries may
have been lost with the stream; what is read again is a duplicate at intake). Entries are read
as the server sends them, so that a field ``intent`` named twice is refused, and entries
trimmed while pending are recorded, never acknowledged silently.

A read brings at most four times ``EXCHANGE_SOURCE_MAX_BYTES`` of entries, plus the one entry
that crosses that line (contract 15), whatever the entries' sizes. Redis cannot bound a read in
bytes, and a COUNT guessed from earlier entries does not hold (one small entry, then hundreds of
large ones: all in one reply); a COUNT that held for entries as large as the limit would be 4, a
round trip per four small entries. So each read is a short Lua script (``READ``, ``CLAIM``)
that reads on the server one entry at a time (``XREADGROUP``/``XAUTOCLAIM`` ``COUNT 1``) and
stops once the entries it holds reach the budget, or at ``BATCH`` entries: small entries still
come 500 to a round trip, large ones stop the read. The price: the server runs up to ``BATCH``
commands in one script (microseconds each; nothing else runs meanwhile), and a Redis whose
ACL forbids ``EVALSHA`` cannot be read (said as the error is).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from typing import Any

import redis.asyncio as redis
from redis.commands.core import AsyncScript
from redis.exceptions import AuthenticationError, ConnectionError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeout
from sqlalchemy import Engine

from exchange.domain.policy import Policy
from exchange.errors import BrokerUnavailable, ConfigurationError
from exchange.failpoints import failpoint
from exchange.intake.sources.common import (
    MEMORY_FACTOR,
    Health,
    Received,
    Taken,
    log_taken,
    safe_key,
    take,
    too_large,
)

log = logging.getLogger(__name__)

BATCH = 500  # entries a read asks for
ROUNDS = 20  # most reads of new entries one pull makes (the cycle goes on after)
BACKOFF_BASE, BACKOFF_MAX = 0.2, 30.0
FIELD = b"intent"
# An entry as the server sends it: its id and its fields as a flat list (field, value, ...), so
# that a field named twice is seen (a dict keeps the last); None for an entry the stream no
# longer holds (trimmed while pending).
Entry = tuple[bytes, list[bytes] | None]
TRIMMED = "the stream no longer holds this entry (trimmed by MAXLEN or XTRIM while pending)"
NO_FIELD_SHOWN = 2000  # characters of an entry without the field intent its record shows

# One read (module docstring): KEYS[1] the stream; ARGV group, consumer, start (">" new entries,
# "0" this consumer's pending ones), budget in bytes, most entries. Reads one entry at a time
# until the entries held reach the budget: at most budget + one entry. Replies as XREADGROUP's
# entries ([id, [field, value, ...] or nil], ...).
READ = """
local key, group, consumer, start = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local budget, most = tonumber(ARGV[4]), tonumber(ARGV[5])
local out, held = {}, 0
while #out < most and held < budget do
  local reply = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', 1,
                           'STREAMS', key, start)
  if not reply or not reply[1] or #reply[1][2] == 0 then break end
  local entry = reply[1][2][1]
  out[#out + 1] = entry
  if entry[2] then for _, part in ipairs(entry[2]) do held = held + #part end end
  if start ~= '>' then start = entry[1] end
end
return out
"""
# XAUTOCLAIM the same way: ARGV group, consumer, min idle (ms), budget, most. Replies as
# XAUTOCLAIM does: [cursor, entries, ids of entries trimmed while pending].
CLAIM = """
local key, group, consumer, idle = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local budget, most = tonumber(ARGV[4]), tonumber(ARGV[5])
local out, gone, held, cursor, turns = {}, {}, 0, '0-0', 0
repeat
  local reply = redis.call('XAUTOCLAIM', key, group, consumer, idle, cursor, 'COUNT', 1)
  cursor, turns = reply[1], turns + 1
  for _, entry in ipairs(reply[2]) do
    out[#out + 1] = entry
    if entry[2] then for _, part in ipairs(entry[2]) do held = held + #part end end
  end
  for _, id in ipairs(reply[3] or {}) do gone[#gone + 1] = id end
until cursor == '0-0' or held >= budget or #out + #gone >= most or turns >= most
return {cursor, out, gone}
"""


def field_twice(count: int) -> str:
    """Why an entry naming the field intent more than once is refused."""
    return f"the entry names the field intent {count} times"


def _head(part: bytes) -> str:
    """The start of a part of an entry, as text: cut before it is decoded."""
    return part[:NO_FIELD_SHOWN].decode("utf-8", "replace")


def _entries(entries: Any) -> list[Entry]:
    """Entries as the server sent them: ``[[id, [field, value, ...] or nil], ...]``."""
    return [(bytes(e[0]), None if e[1] is None else list(e[1])) for e in entries or []]


class RedisSource:
    name = "redis"

    def __init__(
        self,
        url: str,
        stream: str,
        group: str,
        *,
        consumer: str,
        min_idle: float,
        engine: Engine,
        staging_engine: Engine | None,
        kinds: dict[str, Policy],
        max_items: int,
        max_bytes: int,
    ) -> None:
        self.url = url
        self.stream = stream
        self.group = group
        self.consumer = consumer
        self.min_idle_ms = max(1, round(min_idle * 1000))
        self.engine = engine
        self.staging_engine = staging_engine
        self.kinds = kinds
        self.max_items = max_items
        self.max_bytes = max_bytes
        # The bytes of entries one read stops at (module docstring; contract 15).
        self._budget = MEMORY_FACTOR * max_bytes
        self._client: redis.Redis | None = None
        self._scripts: dict[str, AsyncScript] = {}
        self.health = Health()
        self._group_ready = False
        self._own_pending = True  # after a start, read what this consumer left unacknowledged
        self._failures = 0
        self._retry_at = 0.0
        self._idle = False
        self.last_error: str | None = None

    def _redis(self) -> redis.Redis:
        if self._client is None:
            self._client = redis.Redis.from_url(
                self.url, socket_connect_timeout=10, socket_timeout=30
            )
            # Entries as the server sends them (``Entry``): scripts' replies are not reshaped.
            self._scripts = {
                source: self._client.register_script(source) for source in (READ, CLAIM)
            }
        return self._client

    def _describe(self, exc: BaseException) -> str:
        return f"{type(exc).__name__}: {exc}".replace(self.url, "<url>")

    async def _ensure_group(self) -> bool:
        """Creates the group, reading the stream from its start, when missing; True when it
        did."""
        if self._group_ready:
            return False
        try:
            await self._redis().xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
            created = False
        else:
            created = True
        self._group_ready = True
        return created

    async def _group_gone(self) -> None:
        """The stream or its group disappeared under a running worker (a restart without
        persistence, DEL, XGROUP DESTROY): created again as at start (contract 15). What the
        stream held before is gone with it; what is read again is a duplicate at intake."""
        self._group_ready = False
        self._own_pending = True
        await self._ensure_group()
        text = (
            f"the stream {self.stream} or its group {self.group} disappeared and was created "
            "again: entries may have been lost with the stream"
        )
        self.health.warn(text)
        log.warning("redis: %s (entries read again are duplicates)", text)

    def _fail(self, error: str) -> None:
        self._failures += 1
        self.last_error = error
        self.health.stopped(error)
        ceiling = min(BACKOFF_MAX, BACKOFF_BASE * 2 ** min(self._failures, 16))
        self._retry_at = time.monotonic() + random.uniform(0, ceiling)
        self._idle = False
        self._own_pending = True

    @property
    def idle(self) -> bool:
        return self._idle

    async def pull(self) -> Taken:
        now = time.monotonic()
        if now < self._retry_at:
            raise BrokerUnavailable(
                f"Redis: reconnecting in {self._retry_at - now:.1f} s ({self.last_error})",
                said=True,
            )
        total = Taken()
        try:
            if await self._ensure_group():
                log.info("redis: created the consumer group %s on %s", self.group, self.stream)
            try:
                await self._read_all(total)
            except ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                await self._group_gone()
                await self._read_all(total)
        except AuthenticationError:
            self._fail("the server refused the credentials")
            raise ConfigurationError("EXCHANGE_REDIS_URL: Redis refused the password") from None
        except (ConnectionError, RedisTimeout, OSError) as exc:
            await self._reset()
            self._fail(self._describe(exc))
            # One line, said here: the worker says nothing more of it (``said``).
            log.warning("Redis cannot be reached (%s); reconnecting", self.last_error)
            raise BrokerUnavailable(
                f"Redis cannot be reached: {self.last_error}", said=True
            ) from None
        except RedisError as exc:
            self._fail(self._describe(exc))
            raise BrokerUnavailable(f"Redis: {self.last_error}") from None
        except Exception:
            self._own_pending = True  # read and not acknowledged: read again next time
            raise
        if self._failures:
            log.info("Redis: reading %s again", self.stream)
        self._failures = 0
        self.last_error = None
        self.health.started()
        self._idle = total.messages == 0
        log_taken(log, self.name, "entries", total)
        return total

    async def _read_all(self, total: Taken) -> None:
        for read in (self._pending, self._claimed):  # one read held at a time
            await self._take(await read(), total)
        for _ in range(ROUNDS):
            entries = await self._read(">")
            if not entries:
                break
            await self._take(entries, total)

    async def _script(self, source: str, *args: str | int) -> Any:
        """Runs one of the reading scripts (``READ``, ``CLAIM``) on the stream."""
        self._redis()  # the scripts are bound to the client
        return await self._scripts[source](
            keys=[self.stream], args=[self.group, self.consumer, *args]
        )

    async def _read(self, start: str) -> list[Entry]:
        answer = await self._script(READ, start, self._budget, BATCH)
        return _entries(answer)

    async def _pending(self) -> list[Entry]:
        if not self._own_pending:
            return []
        entries = await self._read("0")
        self._own_pending = bool(entries)
        return entries

    async def _claimed(self) -> list[Entry]:
        answer = await self._script(CLAIM, self.min_idle_ms, self._budget, BATCH)
        claimed = _entries(answer[1])
        if claimed:
            log.warning(
                "redis: claimed %d entries another consumer left pending over %g s",
                len(claimed),
                self.min_idle_ms / 1000,
            )
        # Trimmed from the stream while pending (Redis 7: XAUTOCLAIM's third part): nothing
        # left to stage, recorded as the worker's own lost entries are, then acknowledged.
        deleted = answer[2] if len(answer) > 2 else []
        return claimed + [(bytes(entry_id), None) for entry_id in deleted or []]

    async def _take(self, entries: list[Entry], total: Taken) -> None:
        if not entries:
            return
        batch = [self._received(entry_id, fields) for entry_id, fields in entries]
        taken = await asyncio.to_thread(
            take,
            self.engine,
            self.staging_engine,
            self.kinds,
            batch,
            source=self.name,
            max_items=self.max_items,
            max_bytes=self.max_bytes,
        )
        failpoint("source-staged")
        done = [entry_id for n, (entry_id, _) in enumerate(entries) if n not in taken.unrecorded]
        if done:
            await self._redis().xack(self.stream, self.group, *done)
        if taken.unrecorded:
            self._own_pending = True  # left pending: read again at the next pull
        total.add(taken)

    def _received(self, entry_id: bytes, fields: list[bytes] | None) -> Received:
        ident = entry_id.decode("ascii", "replace")
        where = f"redis stream {self.stream}, entry {ident}"
        key = f"{safe_key(self.stream)}-{safe_key(ident)}"
        if fields is None:
            return Received(key=key, body=b"", where=where, refused=TRIMMED)
        pairs = list(zip(fields[::2], fields[1::2], strict=True))
        bodies = [value for name, value in pairs if name == FIELD]
        if len(bodies) > 1:  # refused as a key named twice in a body is (intake.intents)
            return Received(
                key=key,
                body=bodies[0],
                where=where,
                refused=field_twice(len(bodies)),
            )
        if bodies:
            return Received(key=key, body=bodies[0], where=where)
        # No field "intent": the start of what the entry holds is kept for the person who reads
        # the record, and the empty body is refused as not JSON. An entry over the byte limit is
        # refused as a body over it is, unread (contract 15); else each part is cut before it is
        # decoded, so that no more than the record shows is ever decoded.
        size = sum(map(len, fields))
        if size > self.max_bytes:
            return Received(
                key=key,
                body=b"",
                where=f"{where} (no field intent)",
                refused=too_large(size, self.max_bytes),
            )
        shown = {_head(name): _head(value) for name, value in pairs[:NO_FIELD_SHOWN]}
        return Received(
            key=key,
            body=b"",
            where=f"{where} (no field intent: {json.dumps(shown)[:NO_FIELD_SHOWN]})",
        )

    # -- for people ------------------------------------------------------------------------

    async def figures(self) -> dict[str, Any]:
        """Ready (not yet read by the group: its lag) and pending (read, not acknowledged)."""
        try:
            groups = await self._redis().xinfo_groups(self.stream)
        except ResponseError as exc:
            if "no such key" in str(exc).lower():
                return {
                    "source": self.name,
                    "stream": self.stream,
                    "ready": 0,
                    "pending": 0,
                    "group": None,
                }
            raise BrokerUnavailable(f"Redis: {self._describe(exc)}") from None
        except AuthenticationError:
            raise ConfigurationError("EXCHANGE_REDIS_URL: Redis refused the password") from None
        except (RedisError, OSError) as exc:
            raise BrokerUnavailable(f"Redis cannot be reached: {self._describe(exc)}") from None
        for group in groups:
            name = group.get("name")
            if (name.decode() if isinstance(name, bytes) else name) == self.group:
                return {
                    "source": self.name,
                    "stream": self.stream,
                    "group": self.group,
                    "ready": group.get("lag"),
                    "pending": group.get("pending"),
                }
        length = await self._redis().xlen(self.stream)
        return {
            "source": self.name,
            "stream": self.stream,
            "group": None,
            "ready": length,
            "pending": 0,
        }

    async def check(self) -> str:
        figures = await self.figures()
        group = (
            f"group {self.group}" if figures["group"] else f"group {self.group} (created at start)"
        )
        return (
            f"Redis answers; stream {self.stream}, {group}: {figures['ready']} ready, "
            f"{figures['pending']} pending"
        )

    async def _reset(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(RedisError, OSError):
                await client.aclose()

    async def aclose(self) -> None:
        await self._reset()
