"""The backlog (issue 23, item 5; contract 6 ``backlog``): the messages still to deliver and
when they will be done at the current pace.

``messages``: the deliveries new less held (a held one waits for a person, not for the pace),
plus delayed and in progress, less the delayed ones that wait for a person's decision on their
SKU's quarantined main price (``ops.waits.wait_of`` "person": nothing moves them but an
operator's retry or cancel, so no pace or due time says when; counted apart as
``awaiting_person``, review words35b item 2). ``eta_s``: that number divided by the messages
delivered per second over the last minute by all live workers together; None when none was
delivered then (no pace to extrapolate from). A worker is live while its last report is younger than
max(EXCHANGE_LEASE_SECONDS, 3 × EXCHANGE_POLL_INTERVAL) (contract 6)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Connection, func, select

from exchange.db.on_channels import Channel, channel_ids, on
from exchange.db.schema import deliveries, history, workers
from exchange.db.wb_store import held_until
from exchange.domain.policy import KindPolicies
from exchange.domain.states import Event, State
from exchange.i18n import Lang, _, ngettext
from exchange.ops.find import held
from exchange.ops.status import human_age
from exchange.ops.waits import wait_of

PACE_WINDOW = timedelta(minutes=1)


def backlog(
    connection: Connection,
    now: datetime,
    kinds: KindPolicies,
    live: timedelta,
    channel: Channel = None,
) -> dict[str, Any]:
    """The deliveries still to make on ``channel`` (every channel for None), and when."""
    ids = channel_ids(connection, channel)
    by_state: dict[str, int] = {}
    for _channel, state, count in connection.execute(
        select(deliveries.c.channel_id, deliveries.c.state, func.count())
        .where(
            on(deliveries.c.channel_id, ids),
            deliveries.c.state.in_([State.NEW.value, State.DELAYED.value, State.IN_PROGRESS.value]),
        )
        .group_by(deliveries.c.channel_id, deliveries.c.state)
    ).all():
        by_state[state] = by_state.get(state, 0) + int(count)
    waiting = max(0, by_state.get(State.NEW.value, 0) - held(connection, kinds, ids))
    on_person = wait_of(deliveries.c.message_pk, deliveries.c.channel_id, deliveries.c.state)
    person = connection.execute(
        select(func.count()).where(
            on(deliveries.c.channel_id, ids),
            deliveries.c.state == State.DELAYED.value,
            on_person == "person",
        )
    ).scalar_one()
    waiting += by_state.get(State.DELAYED.value, 0) + by_state.get(State.IN_PROGRESS.value, 0)
    waiting -= person
    live_workers = select(workers.c.worker_id).where(
        workers.c.heartbeat_at >= now - live, workers.c.stopped_at.is_(None)
    )
    delivered = connection.execute(
        select(func.count()).where(
            history.c.event == Event.DELIVERED.value,
            history.c.at >= now - PACE_WINDOW,
            history.c.worker.in_(live_workers),
            on(history.c.channel_id, ids),  # a channel's pace is its own deliveries
        )
    ).scalar_one()
    per_second = delivered / PACE_WINDOW.total_seconds()
    eta = round(waiting / per_second, 1) if delivered else None
    # The last delayed delivery's due time (mpminor 8): one held by its channel's own limit
    # (Ozon's hour: due in 59 min) leaves then, whatever the pace of the others says.
    due = connection.execute(
        select(func.max(deliveries.c.next_try_at)).where(
            on(deliveries.c.channel_id, ids),
            deliveries.c.state == State.DELAYED.value,
            on_person != "person",  # looked at again each minute, sent only on a decision
        )
    ).scalar_one()
    due_s = round((due - now).total_seconds(), 1) if due is not None and due > now else None
    # A good held until Wildberries shows whether it applied an upload (its answer lost, or
    # 5xx/422): its delivery's due time is only the next look; the hold's end bounds it
    # (seller review 35: «около 9 мин» of a wait of up to an hour).
    until = held_until(connection, ids, now)
    hold_s = round((until - now).total_seconds(), 1) if until is not None else None
    return {
        "messages": waiting,
        "eta_s": eta,
        "due_s": due_s,
        "hold_s": hold_s,
        "awaiting_person": int(person),
    }


def estimate(figures: dict[str, Any]) -> float | None:
    """When the backlog is done, in seconds: at the current pace (``eta_s``), never before
    the last delayed delivery is due (``due_s``), and at most when the last hold on a possibly
    applied Wildberries upload ends (``hold_s``); None when none says."""
    said = [
        s
        for s in (figures.get("eta_s"), figures.get("due_s"), figures.get("hold_s"))
        if s is not None
    ]
    return max(said) if said else None


Estimate = Literal["hold", "due", "pace"]


def estimate_kind(figures: dict[str, Any]) -> Estimate | None:
    """What the estimate (``estimate``) is, the one rule ``exchange status``'s line, its
    channels' table and the dashboard share: ``hold``, a bound, not a time: a delivery waits
    until Wildberries shows whether it applied an upload (its answer lost, or 5xx/422), up to
    the hold's end (seller review 35: «около 9 мин», the next look, of a wait of up to an
    hour); ``due``, the last delayed delivery's due time, later than the pace says or with no
    pace (a channel's limit, a retry, a catalogue re-read; rev32p: the dashboard said «около
    20 с при нынешнем темпе» of a price due in 10 minutes); ``pace``, the current pace; None
    when nothing says."""
    hold, due, eta = figures.get("hold_s"), figures.get("due_s"), figures.get("eta_s")
    if hold is not None and hold >= max(due or 0.0, eta or 0.0):
        return "hold"
    if due is not None and (eta is None or due > eta):
        return "due"
    return "pace" if eta is not None else None


def waits_for_its_time(figures: dict[str, Any]) -> bool:
    """Whether the estimate is the last delayed delivery's due time (``estimate_kind``)."""
    return estimate_kind(figures) == "due"


def untaken_channels(by_channel: dict[str, dict[str, Any]]) -> list[str]:
    """The channels whose waiting work no worker takes now: paused (by an operator or by the
    site's refusal), or registered but configured in no process (renamed, not yet dropped);
    ``by_channel``: ``channel_status.channel_figures``. Empty unless ALL the work waiting is
    theirs: then no pace, however fast the others delivered, says when it leaves (owner 31
    item 2: «nothing delivered in the last minute» beside a site that delivered 50 just now)."""
    names = [
        name
        for name, channel in by_channel.items()
        if channel["backlog"]["messages"]
        and (channel["paused"] is not None or not channel["configured"])
    ]
    stalled = sum(by_channel[name]["backlog"]["messages"] for name in names)
    waiting = sum(channel["backlog"]["messages"] for channel in by_channel.values())
    return names if names and stalled == waiting else []


def backlog_words(
    figures: dict[str, Any],
    *,
    paused: bool = False,
    unreachable: bool = False,
    lang: Lang = "en",
    channels: bool = False,
    untaken: list[str] | None = None,
    live: bool = True,
) -> str:
    """``exchange status``'s line: "backlog: 54 210 messages, about 45 min at the current
    pace"; "backlog: none" when nothing waits (never "0 messages, about 0 s"), and no estimate
    while delivery is ``paused`` or the site does not answer (``unreachable``); ``eta_s``
    stays the contract's figure: the pace of the last minute. ``channels`` (EXCHANGE_CHANNELS
    set): what does not answer is every channel, not "the site" (contract 13). ``untaken``:
    the channels all the waiting work is on, none of which a worker takes
    (``untaken_channels``); ``live``: whether any worker is live (none: the pace of the last
    minute is no one's, and "none delivered" would be untrue of a run that just ended).
    The prices that wait for an operator's decision on their SKU's quarantined main price
    (``awaiting_person``) are said apart, with no estimate: nothing sends them until then."""
    person = int(figures.get("awaiting_person") or 0)
    if figures["messages"] == 0:
        if person:
            return _person_words(person, lang, _("backlog: none", lang))
        return _("backlog: none", lang)
    count = ngettext("{count} message", "{count} messages", figures["messages"], lang).format(
        count=f"{figures['messages']:,}".replace(",", "\u00a0" if lang == "ru" else " ")
    )
    if paused:
        said = _("backlog: {count}, delivery is paused (no estimate)", lang)
    elif unreachable and channels:
        said = _("backlog: {count}, no channel answers (no estimate)", lang)
    elif unreachable:  # nothing moves: no estimate at 0 requests/s (issue 34 item 3)
        said = _("backlog: {count}, the site does not answer (no estimate)", lang)
    elif untaken:
        said = _(
            "backlog: {count}, all on channels no worker takes now, paused or not configured "
            "({channels}): no estimate",
            lang,
        )
    elif figures["eta_s"] is None and not live:
        said = _("backlog: {count}, no worker is live (no estimate)", lang)
    elif estimate_kind(figures) == "hold":  # a bound: WB may still apply an upload
        said = _(
            "backlog: {count}, up to {eta} (waiting to learn whether WB applied the upload)",
            lang,
        )
    elif waits_for_its_time(figures):  # the last waits for its time: never sooner than that
        # "due", never "due to be sent": a price waiting for 1C's other price type is due to be
        # looked at again then, and may be quarantined (review rev38b)
        said = _("backlog: {count}, about {eta}: the last of them is due then", lang)
    elif figures["eta_s"] is None:
        said = _("backlog: {count}, none delivered in the last minute", lang)
    else:
        said = _("backlog: {count}, about {eta} at the current pace", lang)
    said = said.format(
        count=count, eta=human_age(estimate(figures), lang), channels=", ".join(untaken or ())
    )
    return _person_words(person, lang, said) if person else said


def _person_words(person: int, lang: Lang, said: str) -> str:
    """``said`` and the prices that wait for an operator's decision (no time said)."""
    return _(
        "{said}; waiting for an operator's decision on the main price in quarantine: {count} "
        "(no estimate: none goes before it)",
        lang,
    ).format(said=said, count=person)
