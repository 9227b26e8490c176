"""Asking a channel about its withheld prices (contract 13), and a person's release.

``recheck`` is the periodic check: it reads the withheld deliveries page by page, asks the
channel's target which of them buyers see now (``WithholdsPrices.withheld_shown``), and ends
those ``delivered`` (``queue.withheld.went_live``), and those the channel released at another
price ``cancelled``, superseded (``queue.withheld.left_elsewhere``). The worker calls it every
``RECHECK_EVERY`` seconds; a target without the hooks is never asked, and its withheld
deliveries wait for a newer version (superseded) or a person.

``release`` is ``exchange withheld release`` (and the workbench's button): it asks the channel
to release each named withheld version (``release_withheld``), writes one history row each
with the operator, the note and the channel's answer (where the channel has no way, the answer
says where the seller must act), and ends ``delivered`` those the channel shows at once. No
transaction is held open across a call to the channel (contract 4).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.db.on_channels import channel_ids, channel_names
from exchange.domain.policy import Policy
from exchange.domain.states import State
from exchange.errors import Conflict, OperatorError
from exchange.intake.staged import newest_staged
from exchange.queue import withheld
from exchange.queue.withheld import Withheld
from exchange.targets.base import (
    HoldsAfterAccepting,
    OutgoingMessage,
    Release,
    Shown,
    Target,
    WithholdsPrices,
)

# How often the worker asks a channel about its withheld deliveries (seconds): a
# marketplace's price quarantine lasts minutes to days, and its reads share the pace.
RECHECK_EVERY = 300.0

NO_WAY = (
    "this channel has no way to release a withheld price: confirm it where the channel is "
    "managed, or send a new price"
)


def outgoing(w: Withheld) -> OutgoingMessage:
    return OutgoingMessage(
        w.message_id, w.kind, w.aggregate, w.version, w.payload, w.created_at, w.receipt
    )


async def recheck(
    engine: Engine,
    target: Target,
    now: Callable[[], datetime],
    *,
    channel_id: int | None = None,
    page: int = withheld.READ_AT_MOST,
) -> int:
    """Ask the channel which withheld versions buyers see now; those end ``delivered``.
    Returns how many did."""
    if not isinstance(target, WithholdsPrices):
        return 0
    moved, after = 0, 0
    while True:
        with transaction(engine, read_only=True) as connection:
            rows = withheld.waiting(connection, channel_id=channel_id, after=after, limit=page)
        if not rows:
            return moved
        shown = await target.withheld_shown([outgoing(w) for w in rows])
        live = [w for w, seen in zip(rows, shown, strict=True) if seen is Shown.LIVE]
        gone = [w for w, seen in zip(rows, shown, strict=True) if seen is Shown.ELSEWHERE]
        replaced = [w for w, seen in zip(rows, shown, strict=True) if seen is Shown.REPLACED]
        if live or gone or replaced:
            with transaction(engine) as connection:
                moved += len(withheld.went_live(connection, live, now()))
                withheld.left_elsewhere(connection, gone, now())
                withheld.left_elsewhere(connection, replaced, now(), detail=withheld.REPLACED_THERE)
        if len(rows) < page:
            return moved
        after = rows[-1].pk


def choose_channel(engine: Engine, message_ids: Sequence[str], channel: str | None) -> str:
    """The channel a release acts on (issue 32): the named one (a registered channel, else
    ``OperatorError``); without a name, the one channel where the named messages are withheld,
    or, where none is, the one channel registered. Withheld on several channels, or on none
    with several registered: ``OperatorError`` saying which to name."""
    with transaction(engine, read_only=True) as connection:
        names = channel_names(connection)
        if channel is not None:
            return names[channel_ids(connection, channel)[0]]
        on = withheld.withheld_on(connection, list(dict.fromkeys(message_ids)))
        live = channel_ids(connection)
        missing = [] if on else withheld.unknown(connection, list(dict.fromkeys(message_ids)))
    if missing:  # no such message: said so, never "withheld on no channel"
        raise OperatorError(f"no such message: {', '.join(missing)}")
    if len(on) == 1:
        return names[on[0]]
    if len(on) > 1:
        raise OperatorError(
            f"--channel is required: withheld on {', '.join(names[i] for i in on)}; "
            "name the channel to release on"
        )
    if len(live) == 1:
        return names[live[0]]
    ids = list(dict.fromkeys(message_ids))
    raise Conflict(
        f"only withheld messages can be released: {', '.join(ids)} "
        f"{'is' if len(ids) == 1 else 'are'} withheld on no channel"
    )


def _refuse_behind_staged(
    engine: Engine,
    staging_engine: Engine | None,
    rows: Sequence[Withheld],
    kinds: Mapping[str, Policy] | None,
) -> None:
    """``Conflict`` where 1C has staged a newer version of a withheld one's good that intake
    has not taken yet (workers stopped, intake behind a large package): a row 1C staged is 1C's
    word, and the older released now would go live over it (review release36: 300 released
    while 1C's 1000 waited in staging; Yandex then withheld 1000 against 300)."""
    wanted = [(w.kind, w.aggregate, w.version) for w in rows]
    configured = (
        dict(kinds)
        if kinds is not None
        else dict.fromkeys({w.kind for w in rows}, Policy.LATEST_WINS)
    )
    if staging_engine is None or staging_engine is engine:
        with transaction(engine, read_only=True) as connection:
            newer = newest_staged(connection, connection, wanted, configured)
    else:  # staging_intents in a database of its own
        with (
            transaction(staging_engine, read_only=True) as staged,
            transaction(engine, read_only=True) as connection,
        ):
            newer = newest_staged(staged, connection, wanted, configured)
    pairs = [
        f"{w.message_id} → {found.message_id}"
        for w in rows
        if (found := newer.get((w.kind, w.aggregate))) is not None and found.version > w.version
    ]
    if pairs:
        raise Conflict(
            f"a newer price from 1C is received, not taken in yet: {', '.join(pairs)}; "
            "releasing the older could put it live over the newer: let the service take it "
            "in (exchange status: received from 1C, not taken yet) and let it land, or "
            "release the newest when the channel withholds it"
        )


@dataclass(frozen=True, slots=True)
class Released:
    """One named message after a release: the channel's answer, and whether it is delivered."""

    message_id: str
    asked: bool
    detail: str
    delivered: bool


def _release_detail(answer: Release) -> str:
    """The history's detail of a person's release: the channel's answer, and where it did not
    release the version (no way, or refused), that it did not: the row is the person's ask,
    never a release the channel did not perform."""
    if answer.asked:
        return answer.detail
    return f"{withheld.NOT_RELEASED}{answer.detail}"


async def release(
    engine: Engine,
    target: Target,
    message_ids: Sequence[str],
    *,
    operator: str,
    note: str,
    now: Callable[[], datetime],
    channel: str | None = None,
    staging_engine: Engine | None = None,
    kinds: Mapping[str, Policy] | None = None,
) -> list[Released]:
    """A person's release of withheld versions on the channel ``target`` delivers to
    (``channel``, its name; None: the one channel): all named must be withheld there (else
    nothing is asked and ``OperatorError`` says which are not). None is released over a newer
    version of its good: taken (``newest_newer``) or still in the staging table
    (``staging_engine``'s, None: ``engine``'s), judged as intake would with ``kinds`` (the
    configured kinds; None: the withheld messages' own kinds), ``Conflict`` otherwise."""
    if not note.strip():
        raise OperatorError("--note is required: say why the price is released")
    if not message_ids:
        raise OperatorError("name at least one withheld message")
    ids = list(dict.fromkeys(message_ids))
    with transaction(engine, read_only=True) as connection:
        channel_id = None if channel is None else channel_ids(connection, channel)[0]
        found = withheld.named(connection, ids, channel_id=channel_id)
    missing = [i for i, w in found.items() if w == "missing"]
    if missing:
        raise OperatorError(f"no such message: {', '.join(missing)}")
    not_withheld = [f"{i} is {w}" for i, w in found.items() if isinstance(w, str)]
    if not_withheld:
        raise Conflict(f"only withheld messages can be released: {', '.join(not_withheld)}")
    rows = [w for w in found.values() if isinstance(w, Withheld)]
    with transaction(engine, read_only=True) as connection:
        newer = withheld.newest_newer(connection, rows)
    waiting = {o: n.message_id for o, n in newer.items() if n.state != State.DELIVERED.value}
    # accepted by the channel, not shown yet: its quarantine may hold it too, listed a little
    # later, never «not delivered yet» as if it had not gone (words38 item 6)
    taken = {
        o: n.message_id
        for o, n in newer.items()
        if o in waiting
        and isinstance(target, HoldsAfterAccepting)
        and target.accepted_unshown(n.receipt)
    }
    if taken and taken == waiting:
        pairs = ", ".join(f"{old} → {new}" for old, new in taken.items())
        raise Conflict(
            f"a newer price from 1C was accepted by this channel after the withheld one and "
            f"is not shown to buyers yet: {pairs}; the channel may be holding it in its price "
            "quarantine too (it is then withheld within a minute or so): releasing the older "
            "could put it live over the newer: look again in a minute (exchange withheld "
            "list), and release the newest when the channel withholds it"
        )
    if waiting:  # not delivered yet: never said to have gone (review ym34 finding 2)
        pairs = ", ".join(f"{old} → {new}" for old, new in waiting.items())
        raise Conflict(
            f"a newer price from 1C waits to go to this channel after the withheld one, not "
            f"delivered yet: {pairs}; releasing the older could put it live over the newer: "
            "let the newer land (exchange status says what it waits for), or release the "
            "newest when the channel withholds it"
        )
    if newer:
        pairs = ", ".join(f"{old} → {new.message_id}" for old, new in newer.items())
        raise Conflict(
            f"a newer price went to this channel after the withheld one: {pairs}; releasing "
            "the older could put it live over the newer: release the newest when the channel "
            "withholds it, or let it land"
        )
    _refuse_behind_staged(engine, staging_engine, rows, kinds)
    if isinstance(target, WithholdsPrices):
        answers = await target.release_withheld([outgoing(w) for w in rows])
    else:
        answers = [Release(False, NO_WAY) for _ in rows]
    live = [w for w, a in zip(rows, answers, strict=True) if a.shown is Shown.LIVE]
    with transaction(engine) as connection:
        at = now()
        withheld.released(
            connection,
            [(w, _release_detail(a)) for w, a in zip(rows, answers, strict=True)],
            at,
            operator=operator,
            note=note,
        )
        ended = withheld.went_live(
            connection,
            live,
            at,
            detail="released by a person: the channel shows this version to buyers",
            operator=operator,
            note=note,
        )
    delivered = {w.message_id for w in ended}
    return [
        Released(w.message_id, a.asked, a.detail, w.message_id in delivered)
        for w, a in zip(rows, answers, strict=True)
    ]
