"""The words of the report in Russian and English, and the rows that CSV and XLSX share.

Operators next to 1C read Russian; English is there for the site team and for the logs of
whoever reads a report far from 1C. Reason codes (``http-422``) stay as they are in both
languages: they are what ``exchange quarantine list --reason`` takes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from urllib.parse import quote
from zoneinfo import ZoneInfo

from exchange.i18n import N_, _, moment, ngettext
from exchange.ops.waits import Wait, awaiting_in_story
from exchange.report.model import Entry, HistoryEvent, Lang, Report
from exchange.words import (
    error_words,
    event_said,
    name,
    on_marketplace,
    reason_target,
    state_said,
)

# Each label in English, marked for the catalogs (exchange/locale: the Russian is there). The order
# of COLUMNS is the order of the detail table.
_LABELS: dict[str, str] = {
    "title": N_("Exchange quarantine: operators' report"),
    "generated_at": N_("Generated (UTC)"),
    "filters": N_("Filters"),
    "no_filters": N_("the whole quarantine"),
    # the filters, as the summary's «Отбор» names them (``describe_filters``)
    "filter_aggregate": N_("Aggregate or SKU begins with"),
    "filter_search": N_("Search"),
    "filter_since": N_("Quarantined from (UTC)"),
    "filter_until": N_("Quarantined before (UTC)"),
    "filter_superseded": N_("only those superseded after quarantine"),
    "total": N_("Entries in quarantine"),
    "oldest_age": N_("The oldest entry has waited"),
    "oldest_at": N_("The oldest entry quarantined at (UTC)"),
    "superseded_total": N_("Superseded after quarantine (a newer version was delivered)"),
    "withheld": N_(
        "Withheld by the channel from buyers, not in the quarantine (exchange withheld release)"
    ),
    "by_reason": N_("Entries by reason"),
    "count": N_("Count"),
    "activity": N_("Deliveries and failures per day (UTC, all kinds)"),
    "day": N_("Day (UTC)"),
    "delivered": N_("Delivered"),
    "failed": N_("Failures"),
    "entries": N_("Quarantined messages"),
    "empty": N_("The quarantine is empty."),
    "history": N_("History"),
    "payload_and_history": N_("Payload and history"),
    "summary_sheet": N_("Summary"),
    "detail_sheet": N_("Quarantine"),
    "history_sheet": N_("History"),
    "yes": N_("yes"),
    "no": N_("no"),
    "truncated": N_("truncated, characters in all"),
    "superseded_badge": N_("superseded"),
    "numbers": N_("Numbers"),
    # detail columns
    "message_id": N_("Message ID"),
    "channel": N_("Channel"),
    "kind": N_("Kind"),
    "aggregate": N_("Aggregate"),
    "version": N_("Version"),
    "reason": N_("Reason"),
    "superseded_after_quarantine": N_("Superseded after quarantine"),
    "attempts": N_("Attempts"),
    "first_seen": N_("First seen (UTC)"),
    "last_attempt": N_("Last attempt (UTC)"),
    "quarantined_at": N_("Quarantined at (UTC)"),
    "last_result": N_("Last HTTP status or error"),
    "next_check": N_("Next check"),
    "source_ref": N_("1C document"),
    "payload": N_("Payload"),
    # history columns
    "at": N_("When (UTC)"),
    "event": N_("Event"),
    "from": N_("From"),
    "to": N_("To"),
    "worker": N_("Worker"),
    "attempt": N_("Attempt"),
    "leased_at": N_("Leased at"),
    "lease_until": N_("Lease ran out"),
    "http_or_error": N_("HTTP / error"),
    "detail": N_("Detail"),
    "operator": N_("Operator"),
    "note": N_("Note"),
}

COLUMNS: tuple[str, ...] = (
    "message_id",
    "kind",
    "aggregate",
    "version",
    "reason",
    "superseded_after_quarantine",
    "attempts",
    "first_seen",
    "last_attempt",
    "quarantined_at",
    "last_result",
    "next_check",
    "source_ref",
    "payload",
)
HISTORY_COLUMNS: tuple[str, ...] = (
    "message_id",
    "at",
    "event",
    "from",
    "to",
    "worker",
    "attempt",
    "leased_at",
    "lease_until",
    "http_or_error",
    "detail",
    "operator",
    "note",
)


# The labels that name the zone of their times: the report's zone (EXCHANGE_DISPLAY_TZ).
ZONED = frozenset(
    {
        "generated_at",
        "oldest_at",
        "first_seen",
        "last_attempt",
        "quarantined_at",
        "at",
        "filter_since",
        "filter_until",
        "activity",
        "day",
    }
)


def label(key: str, lang: Lang, zone: str = "UTC") -> str:
    text = _(_LABELS[key], lang)
    return text.replace("(UTC", f"({zone}") if key in ZONED else text


# -- the next check, in plain words ----------------------------------------------------------

# The steps a next check names, as a report says them (its reader has the command line: each
# entry carries its command, ``command``). A page says them with its own buttons instead
# (``next_check``'s ``steps``: the workbench's words), never a command.
STEP_NAMES = ("retry", "cancel", "restart", "history", "withheld")
# A page's steps may add where their buttons are (``exchange.words.file_steps``): a file has
# none, and the place is said once after the advice, however many buttons it names.
PLACE = "place"
_PRESSED = ("retry", "cancel")
_REPORT_STEPS: dict[str, str] = {
    "retry": N_("retry the message"),
    "cancel": N_("cancel this record"),
    "restart": N_("restart exchange run"),
    "history": N_("the message's history (exchange history)"),
    # where a person decides on a price the channel withholds (``_INVALID_NEWER_WITHHELD``)
    "withheld": N_("the withheld list (exchange withheld list)"),
}
# The same steps for all the entries of one reason (a summary's row): each with the command
# that shows them first and, with --yes added, does it.
_REASON_STEPS: dict[str, str] = {
    "retry": N_("retry them ({command})"),
    "cancel": N_("cancel them ({command})"),
}
# A summary's step for some entries of a reason only: the reason's command would act on all.
_EACH_BY_ITS_COMMAND = N_("cancel each of them by the command in its row")

_NEXT_CHECK: dict[str, str] = {
    "unmapped-price-type": N_(
        "The shop does not know this price type: add it to the shop's setting "
        "EXCHANGE_WOO_PRICE_FIELDS (WooCommerce) or EXCHANGE_BITRIX_PRICE_TYPES (1C-Bitrix), "
        "{restart} and {retry}. To leave this price type out of this shop, map it to null and "
        "{cancel}."
    ),
    "invalid-contract": N_(
        "Fix the document in 1C and post it again with a new version; then {cancel}."
    ),
    "unsupported-schema": N_(
        "Update the service (or the 1C exchange settings) so that both use the same payload "
        "schema; then {cancel} and post the document again."
    ),
    "unknown-kind": N_(
        "Configure the kind in EXCHANGE_KINDS or stop 1C from writing it; then {cancel}."
    ),
    "version-conflict": N_(
        "Two different payloads carry one version: check in 1C which one is right and post it "
        "with a new version; then {cancel}."
    ),
    "sequence-gap": N_(
        "A previous version never arrived: look for it in the 1C exchange log. When it has been "
        "written, {retry}; to skip it, {cancel}."
    ),
    "retry-limit": N_(
        "The site kept failing for this message: check the last error with the site team, then "
        "{retry}."
    ),
    "unroutable": N_(
        "RabbitMQ returned the message: no queue is bound to EXCHANGE_RABBITMQ_EXCHANGE for this "
        "kind (the routing key is the kind). Bind the shop's queue, then {retry}."
    ),
    "not-for-this-shop": N_(
        "Left out on purpose: the shop's mapping (EXCHANGE_WOO_PRICE_FIELDS or "
        "EXCHANGE_BITRIX_PRICE_TYPES) maps this price type to null. Nothing to do; to send it, "
        "map the price type to a field or price type of the shop."
    ),
    "unknown-response": N_(
        "The site answered something the service does not understand: ask the site team what it "
        "did, then {retry} or {cancel}."
    ),
    "unknown-sku": N_(
        "The shop has no product or variation with this SKU: create it in the shop, or correct "
        "the SKU in 1C and post the price again. Once the product exists, {retry}; if the price "
        "is no longer needed, {cancel}."
    ),
    "shop-failure": N_(
        "The shop's exchange answered failure for good: check the last error with the site team, "
        "then {retry} or {cancel}."
    ),
    "invalid-for-channel": N_(
        "The marketplace cannot take this price as it is (the last error says why: its "
        "currency, kopecks, a price rule, no article): correct the price in 1C and post it "
        "again, or change the channel's setting the error names, then {retry}; otherwise "
        "{cancel}. Where the last error says a new price from 1C waits for a person's decision "
        "on this one (a rule of two price types): {retry} to send both together, or {cancel} "
        "to leave the price the error names live beside the new one. Where it says the service "
        "sent the price without a strikethrough price, so the marketplace no longer shows the "
        "one 1C replaced, buyers see none now: to show one, post from 1C a strikethrough price "
        "that keeps the rule; to leave the price without one, {cancel}."
    ),
    "channel-rule": N_(
        "The marketplace refused the price by one of its rules (its code and meaning are in the "
        "last error): correct the price in 1C and post it again, then {cancel}. Where the last "
        "error says a new price from 1C waits for a person's decision on this one (a rule of "
        "two price types): {retry} to send both together, or {cancel} to leave the price the "
        "error names live beside the new one."
    ),
}
_REJECTED_BY_SITE = N_(
    "The site rejected the message ({reason}): check the payload with the site team, correct it "
    "in 1C, then {cancel} or {retry}."
)
# The advice where the site's words would be wrong on a marketplace's channel (contract 14):
# there is no site team, and a marketplace may have taken the price it did not confirm.
_MARKETPLACE_CHECK: dict[str, str] = {
    # Every try failed for a temporary cause: the marketplace refused it by name (a
    # Wildberries sale lock: it took nothing) or did not answer (it may have taken it); the
    # last error says which (rev32p: «могла всё же принять» of a price WB refused by name).
    "retry-limit": N_(
        "Every try failed for a temporary cause, the one in the last error: where the "
        "marketplace refused the price by name (a sale lock, say), it took nothing; where it did "
        "not answer, it may have taken the price. Check the price in the marketplace's cabinet, "
        "then {retry} or {cancel}."
    ),
    "unknown-response": N_(
        "The marketplace answered something the service does not understand, and may have taken "
        "the price: check the price in the marketplace's cabinet, then {retry} or {cancel}."
    ),
    # A marketplace's channel maps its price types itself (contract 14, docs/marketplaces:
    # ozon_price_types, wb_price_types, ym_price_types): the shop's settings are refused with
    # EXCHANGE_CHANNELS, so naming them would send the seller to a setting that cannot be set.
    "unmapped-price-type": N_(
        "The channel does not know this price type: add it to the channel's own price mapping "
        "(ozon_price_types on Ozon, wb_price_types on Wildberries, ym_price_types on Yandex "
        "Market; in the channel's table [channels.NAME] of the TOML file or in "
        "EXCHANGE_CHANNELS), {restart} and {retry}. To leave this price type out of this "
        "channel, map it to false (null in EXCHANGE_CHANNELS) and {cancel}."
    ),
    "not-for-this-shop": N_(
        "Left out on purpose: the channel's own price mapping (ozon_price_types, "
        "wb_price_types or ym_price_types) maps this price type to false. Nothing to do; to "
        "send it, map the price type to a price field of the marketplace."
    ),
}
# A marketplace's ``unknown-sku`` (contract 14): no shop product, but an offer missing from the
# marketplace's own catalogue, in its own terms (research §1.4 Ozon's offer_id, §2 WB's vendor
# code, §3 Yandex Market's offerId), and the channel's mapping that names it (``sku_source``).
_MARKETPLACE_UNKNOWN_SKU: dict[str, str] = {
    "ozon": N_(
        "Ozon's catalogue has no product with this offer_id (the seller's article on Ozon): "
        "create the product card in Ozon's seller cabinet, or correct the article in 1C or the "
        "channel's sku_source (the SKU or 1C's article as offer_id). Once the card exists, "
        "{retry}; if the price is no longer needed, {cancel}."
    ),
    "wildberries": N_(
        "Wildberries' catalogue has no good with this vendor code (the seller's article on "
        "Wildberries): create the good's card in the Wildberries seller's cabinet, or correct "
        "the article in 1C or the channel's sku_source (the SKU or 1C's article as vendor "
        "code). Once the card exists, {retry}; if the price is no longer needed, {cancel}."
    ),
    "yandex-market": N_(
        "Yandex Market's catalogue has no offer with this offerId (the seller's SKU on the "
        "Market): add the offer to the catalogue in the Market's seller cabinet, or correct the "
        "article in 1C or the channel's sku_source (the SKU or 1C's article as offerId). Once "
        "the offer exists, {retry}; if the price is no longer needed, {cancel}."
    ),
}
_REJECTED_BY_MARKETPLACE = N_(
    "The marketplace rejected the message ({reason}): read its words in the last error, check "
    "the product in the marketplace's cabinet, correct the price in 1C, then {cancel} or "
    "{retry}."
)
_SUPERSEDED = N_(
    "A newer version of this aggregate was delivered after this one was quarantined: nothing is "
    "left to fix, {cancel}."
)
# The same on a marketplace's channel: no site (contract 14), the marketplace as its reasons
# say it (review 36, item 6: «на сайт» of a Yandex Market channel).
_SUPERSEDED_ON_MARKETPLACE = N_(
    "A newer version of this aggregate was delivered to the marketplace after this one was "
    "quarantined: nothing is left to fix, {cancel}."
)
_UNKNOWN_REASON = N_("Look at {history} and decide.")
# A price the marketplace cannot take, of which 1C has sent a newer version since: that one
# goes in its place, a retry of this one would only end superseded (seller review 35).
_INVALID_NEWER_SENT = N_(
    "The marketplace cannot take this price as it is (the last error says why), and 1C has "
    "sent a newer version of it since, which goes in its place: {cancel}. A retry would only "
    "end superseded by the newer one."
)
# The same where every newer version 1C has sent is in quarantine too (``ops.quarantine.
# newer_held``): none goes in its place, buyers keep the price delivered before (review 36,
# item 4: the words said the newer one would go).
_INVALID_NEWER_HELD = N_(
    "The marketplace cannot take this price as it is (the last error says why), and 1C has "
    "sent a newer version of it since, but that one is in quarantine too, so nothing goes in "
    "their place yet and buyers see the price delivered before: {cancel} (a retry would only "
    "end superseded by the newer one), then decide on the newer one by its own advice."
)
# The same where every newer version 1C has sent is withheld by the marketplace (its own price
# quarantine: Yandex Market's, Wildberries') or in quarantine too, one at least withheld
# (``ops.quarantine.newer_withheld``): the marketplace took it but buyers do not see it until
# someone releases it, so none goes in its place yet (review rev36b: the words said it went).
_INVALID_NEWER_WITHHELD = N_(
    "The marketplace cannot take this price as it is (the last error says why), and 1C has "
    "sent a newer version of it since, but the marketplace withholds that one in its own "
    "price quarantine, so buyers see the price delivered before until it is released: "
    "{cancel} (a retry would only end superseded by the newer one), then open {withheld} and "
    "decide on the newer one there."
)
# A quarantined price 1C has sent a newer version of since, where that changes its advice
# (``newer_advised``): the newer one goes in its place, it is in quarantine too, or the
# marketplace withholds it.
NEWER_GOES, NEWER_HELD, NEWER_WITHHELD = "goes", "held", "withheld"
NEWER_KINDS = (NEWER_GOES, NEWER_HELD, NEWER_WITHHELD)
# A quarantined record superseded after quarantine: its advice is its own too (``own_advice``:
# the quarantine's list of the workbench says it apart, as the message page does).
SUPERSEDED = "superseded"


def advice_words(
    reason: str | None,
    target: str | None,
    *,
    superseded: bool = False,
    newer: bool = False,
    held: bool = False,
    withheld: bool = False,
) -> str:
    """The advice ``next_check`` says for ``reason`` on a channel of ``target``, untranslated:
    the one place that decides it per target's kind (a site's or a marketplace's, contract 14).
    Two channels whose advice is the same text have one advice (the workbench's quarantine
    page says it once, ``web.workbench.core.reasons_on``). ``newer``: 1C has sent a newer
    version since (``ops.quarantine.newer_version_sent``): a price invalid for the channel is
    cancelled then, never retried; ``held``: every such version is in quarantine too
    (``ops.quarantine.newer_held``), so none goes in its place; ``withheld``: the channel
    withholds one of them and the others are in quarantine (``ops.quarantine.newer_withheld``),
    so none reaches buyers until it is released."""
    marketplace = on_marketplace(target)
    if superseded:
        return _SUPERSEDED_ON_MARKETPLACE if marketplace else _SUPERSEDED
    if newer and reason == "invalid-for-channel":
        if withheld:
            return _INVALID_NEWER_WITHHELD
        return _INVALID_NEWER_HELD if held else _INVALID_NEWER_SENT
    if marketplace and reason and reason.startswith("http-"):
        return _REJECTED_BY_MARKETPLACE
    if marketplace and reason == "unknown-sku" and target in _MARKETPLACE_UNKNOWN_SKU:
        return _MARKETPLACE_UNKNOWN_SKU[target]
    if marketplace and reason in _MARKETPLACE_CHECK:
        return _MARKETPLACE_CHECK[reason]
    if reason and reason.startswith("http-"):
        return _REJECTED_BY_SITE
    return _NEXT_CHECK.get(reason or "", _UNKNOWN_REASON)


def newer_advised(
    reason: str | None,
    target: str | None,
    newer: bool,
    *,
    superseded: bool = False,
    held: bool = False,
    withheld: bool = False,
) -> str | None:
    """Whether 1C's newer version (``newer``: ``ops.quarantine.newer_sent``; ``held``: every
    such version in quarantine too, ``newer_held``; ``withheld``: withheld by the channel,
    ``newer_withheld``) gives the record its own advice for ``reason`` on a channel of
    ``target`` (``advice_words``): ``NEWER_GOES``, ``NEWER_HELD`` or ``NEWER_WITHHELD`` where
    it does, None where not. A record superseded after quarantine takes
    that advice instead (review 36, item 5: such rows were counted among these). The one
    decision the quarantine's list, its message page and the report's rows and summary
    share: where it is not None, a list says the record apart from the others of its
    reason."""
    if not newer or superseded:
        return None
    if advice_words(reason, target, newer=True, held=held, withheld=withheld) == advice_words(
        reason, target
    ):
        return None
    return NEWER_WITHHELD if withheld else NEWER_HELD if held else NEWER_GOES


def own_advice(
    reason: str | None,
    target: str | None,
    newer: bool,
    *,
    superseded: bool = False,
    held: bool = False,
    withheld: bool = False,
) -> str | None:
    """The advice of its own a record of the quarantine takes apart from the others of its
    reason: ``SUPERSEDED`` where it is superseded after quarantine (its message page's
    advice, ``advice_words``), else ``newer_advised``'s. The workbench's quarantine list
    says each apart, its rows and its «Что делать дальше» (review rev36b, item 2: a superseded
    row's advice was in its message page only)."""
    if superseded:
        return SUPERSEDED
    return newer_advised(reason, target, newer, held=held, withheld=withheld)


def advised(kind: str | None) -> dict[str, bool]:
    """The flags of ``advice_words`` (and ``next_check``) that say the advice of its own
    ``kind`` (``own_advice``, ``newer_advised``; None: the reason's)."""
    return {
        "superseded": kind == SUPERSEDED,
        "newer": kind in NEWER_KINDS,
        "held": kind == NEWER_HELD,
        "withheld": kind == NEWER_WITHHELD,
    }


def next_check(
    reason: str | None,
    lang: Lang = "en",
    *,
    superseded: bool = False,
    steps: dict[str, str] | None = None,
    target: str | None = None,
    newer: bool = False,
    held: bool = False,
    withheld: bool = False,
) -> str:
    """What the operator has to check or do next, in plain words. ``steps`` says each of
    ``STEP_NAMES`` as a page does (its buttons); a report's own words by default. ``target``:
    the channel's; a marketplace's (``words.on_marketplace``) has no site team to ask.
    ``newer``: 1C has sent a newer version since; ``held``: it is in quarantine too;
    ``withheld``: the channel withholds it (``advice_words``)."""
    words = advice_words(
        reason, target, superseded=superseded, newer=newer, held=held, withheld=withheld
    )
    said = steps if steps is not None else {k: _(v, lang) for k, v in _REPORT_STEPS.items()}
    advice = _(words, lang).format(reason=reason, **{k: said[k] for k in STEP_NAMES})
    pressed = sum(words.count(f"{{{step}}}") for step in _PRESSED)
    if PLACE in said and pressed:
        where = ngettext("The button is {place}.", "The buttons are {place}.", pressed, lang)
        advice = f"{advice} {where.format(place=said[PLACE])}"
    return advice


def reason_steps(reason: str, lang: Lang, channels: Sequence[str] = ()) -> dict[str, str]:
    """The steps of a report's summary row for ``reason``: each names the command for all its
    entries (shown first; ``--yes`` does it), in the report's language; one a channel of
    ``channels`` with its ``--channel`` (seller 34 item 4: where there are several, the
    command says which channel's records it acts on)."""
    said = {k: _(v, lang) for k, v in _REPORT_STEPS.items()}
    for step, words in _REASON_STEPS.items():
        command = "; ".join(
            f'exchange quarantine {step} --reason {reason}{on} --note "…"'
            for on in ([f" --channel {c}" for c in channels] or [""])
        )
        said[step] = _(words, lang).format(command=command)
    return said


def summary_next_check(report: Report, reason: str, lang: Lang) -> str:
    """«Что сделать» of the summary's row for ``reason``: with the page's buttons in a
    workbench export, with the commands in the command line's report; each kind's advice
    where its entries are on channels of different advice (``advice_by_kind``)."""
    entries = [entry for entry in report.entries if entry.reason == reason]
    on = {entry.channel for entry in entries}
    # with several channels, each channel's command (intake's record, no channel's: the bare)
    channels = sorted(c for c in on if c) if report.several_channels and None not in on else []
    steps = report.steps or reason_steps(reason, lang, channels)
    # Those of which 1C has sent a newer version since take their own advice (``newer_advised``:
    # a price invalid for its channel is cancelled then), each by its own command, never by
    # the reason's bulk one, which would cancel the others too (seller review 35).
    # Each group is counted by the very advice its rows take (review 36, item 5: a row
    # superseded after quarantine says that advice, never this one).
    kinds: dict[str, list[Entry]] = {}
    rest: list[Entry] = []
    for e in entries:
        kind = _newer_of(e)
        (kinds.setdefault(kind, []) if kind else rest).append(e)
    if not kinds:
        return advice_by_kind(reason, {entry.target for entry in entries}, lang, steps)
    each = report.steps or {**steps, "cancel": _(_EACH_BY_ITS_COMMAND, lang)}
    groups = [(kind, kinds[kind]) for kind in NEWER_KINDS if kind in kinds]
    if not rest and len(groups) == 1:
        kind, newer = groups[0]
        target = reason_target(entry.target for entry in newer)
        return next_check(reason, lang, steps=each, target=target, **advised(kind))
    bare = {step: words for step, words in each.items() if step != PLACE}  # said once, above
    lines = [advice_by_kind(reason, {entry.target for entry in rest}, lang, steps)] if rest else []
    for kind, newer in groups:
        target = reason_target(entry.target for entry in newer)
        advice = next_check(reason, lang, steps=bare, target=target, **advised(kind))
        lines.append(_("Of these, {count}: {advice}", lang).format(count=len(newer), advice=advice))
    return "\n".join(lines)


def _newer_of(entry: Entry) -> str | None:
    """``newer_advised`` of a report's entry: the advice of its own it takes, if any."""
    return newer_advised(
        entry.reason,
        entry.target,
        entry.newer_version_sent,
        superseded=entry.superseded_after_quarantine,
        held=entry.newer_version_held,
        withheld=entry.newer_version_withheld,
    )


def advice_by_kind(
    reason: str, targets: Iterable[str | None], lang: Lang, steps: dict[str, str] | None = None
) -> str:
    """The advice of one row for every record of ``reason`` (a report's summary, the
    notice's line), on channels of ``targets``. Where they take different advice
    (``unknown-sku`` on Ozon and on Yandex Market: each its own catalogue, ``advice_words``)
    each advice is said once, on a line of its own after the channels' kinds it is for
    (review 33: one marketplace's advice stood for all), the buttons' place once; one advice
    as ``next_check`` says it for ``words.reason_target``."""
    found = set(targets)
    groups = advice_groups(reason, found)
    if len(groups) < 2:
        return next_check(reason, lang, steps=steps, target=reason_target(found))
    said = steps if steps is not None else {k: _(v, lang) for k, v in _REPORT_STEPS.items()}
    bare = {step: words for step, words in said.items() if step != PLACE}
    parts = [
        _("{targets}: {advice}", lang).format(
            targets=", ".join(_target_named(t, lang) for t in group),
            advice=next_check(reason, lang, steps=bare, target=group[0]),
        )
        for group in groups
    ]
    pressed = sum(
        advice_words(reason, group[0]).count(f"{{{step}}}") for group in groups for step in _PRESSED
    )
    if PLACE in said and pressed:
        where = ngettext("The button is {place}.", "The buttons are {place}.", pressed, lang)
        parts.append(where.format(place=said[PLACE]))
    return "\n".join(parts)


def advice_groups(reason: str, targets: Iterable[str | None]) -> list[tuple[str | None, ...]]:
    """``targets`` grouped by the advice they take for ``reason`` (``advice_words``, the one
    place that decides it per target's kind): one group where the advice is one, whatever
    the channels."""
    groups: dict[str, list[str | None]] = {}
    for target in sorted(set(targets), key=lambda t: (t is None, t or "")):
        groups.setdefault(advice_words(reason, target), []).append(target)
    return [tuple(group) for group in groups.values()]


def _target_named(target: str | None, lang: Lang) -> str:
    """A channel's kind as a summary's advice names it: the marketplace, or the site
    (an intake's record, no channel's, speaks of the site too)."""
    return name("target", target or "api", lang)


def summary_target(report: Report, reason: str) -> str | None:
    """The target the summary's row for ``reason`` speaks of (``words.reason_target``, the
    rule ``status`` and the dashboard share): its entries' marketplace where every one is on
    a marketplace's channel, so its name and advice are the marketplace's."""
    return reason_target(entry.target for entry in report.entries if entry.reason == reason)


def cause(entry: Entry, lang: Lang) -> str | None:
    """The concrete cause of this entry in the report's language, or None."""
    text = entry.last_result
    if not text:
        return None
    if lang == "en":
        return text
    # The error's own words in Russian, its HTTP status kept before them (``result_words``):
    # the whole «HTTP 200: …» matched no pattern and came out English «(как записано)».
    shown = result_words(entry, "ru") or text
    if shown == text:
        shown = error_words(text, "ru")  # the same Russian as the workbench's pages
    return shown if shown != text else _("(as recorded) {text}", lang).format(text=text)


def command(entry: Entry) -> str:
    """A ready-to-run command for this entry: retry what may go again, cancel the rest (a
    superseded one, and a price invalid for its channel of which 1C has sent a newer version
    since: ``advice_words`` advises cancel for both; a price the marketplace refused by its
    rule, which the advice says to correct in 1C and cancel, unless its last error says a new
    price from 1C waits for a person's decision on it, where a retry sends both: review rev39
    W2, the command said retry, and each retry spent two of the product's ten updates of the
    hour on Ozon to land in quarantine again)."""
    advice = advice_words(
        entry.reason,
        entry.target,
        superseded=entry.superseded_after_quarantine,
        newer=entry.newer_version_sent,
        held=entry.newer_version_held,
        withheld=entry.newer_version_withheld,
    )
    cancel = (
        entry.rejected_row
        or advice
        in (
            _SUPERSEDED,
            _SUPERSEDED_ON_MARKETPLACE,
            _INVALID_NEWER_SENT,
            _INVALID_NEWER_HELD,
            _INVALID_NEWER_WITHHELD,
        )
        or (advice == _NEXT_CHECK["channel-rule"] and not _pair_waits(entry.last_error))
    )
    # with several channels, the entry's own (seller 34 item 4): the command acts there only
    on = f" --channel {entry.channel}" if entry.several_channels and entry.channel else ""
    if cancel:
        return f'exchange quarantine cancel {entry.message_id}{on} --note "…"'
    return f'exchange quarantine retry {entry.message_id}{on} --note "…"'


def _pair_waits(last_error: str | None) -> bool:
    """The record's last error says a new price from 1C waits for a person's decision on it
    (``words`` "…; a new old_price from 1C waits for a person's decision on this price: …",
    written in English whatever the report's language)."""
    return "waits for a person's decision on this" in (last_error or "")


def entry_next_check(entry: Entry, lang: Lang, steps: dict[str, str] | None = None) -> str:
    """What to do, the concrete cause in the report's language, and the command to run; with
    a page's ``steps`` (``Report.steps``: an export of the workbench) its buttons instead, and
    no command."""
    advice = next_check(
        entry.reason,
        lang,
        superseded=entry.superseded_after_quarantine,
        steps=steps,
        target=entry.target,
        newer=entry.newer_version_sent,
        held=entry.newer_version_held,
        withheld=entry.newer_version_withheld,
    )
    found = cause(entry, lang)
    parts = [sentence(advice)]
    if found:
        parts.append(sentence(_("Cause: {cause}", lang).format(cause=found)))
    if steps is None:
        # the command last, as it is to be copied: no full stop of ours after its closing quote
        parts.append(_("Command: {command}", lang).format(command=command(entry)))
    return " ".join(parts)


_SENTENCE_END = (".", "!", "?", "…")
_CLOSING = "\"'»”’)]"


def sentence(text: str) -> str:
    """``text`` ending as a sentence, so the next part does not run on from it («Cause: HTTP
    422: rejected Command: …»): a full stop added unless it already ends with one (``.``,
    ``!``, ``?``, ``…``), also inside closing quotes or brackets («… “done.”»)."""
    text = text.rstrip()
    if not text or text.rstrip(_CLOSING).endswith(_SENTENCE_END):
        return text
    return text + "."


def result_words(entry: Entry, lang: Lang) -> str | None:
    """The column «Последний HTTP-статус или ошибка» in the report's language: the HTTP status
    (and a code) as they are, the service's English cause as the workbench's pages say it
    (``error_words``); English (and JSON) keep the stored text."""
    text = entry.last_result
    if lang == "en" or not text or not entry.last_error:
        return text
    return text.replace(entry.last_error, error_words(entry.last_error, "ru"), 1)


# -- values as people read them --------------------------------------------------------------


def human_age(seconds: float | None, lang: Lang) -> str:
    """``3 d 4 h``, ``5 min``: the two largest units are enough to decide what comes first."""
    if seconds is None:
        return "—"
    units = (
        (86400, N_("{count} d")),
        (3600, N_("{count} h")),
        (60, N_("{count} min")),
        (1, N_("{count} s")),
    )
    left, parts = int(max(seconds, 0)), list[str]()
    for size, unit in units:
        if left >= size or (size == 1 and not parts):
            parts.append(_(unit, lang).format(count=left // size))
            left %= size
        if len(parts) == 2:
            break
    return " ".join(parts)


def clock_time(value: datetime | None, zone: str = "UTC", lang: Lang = "en") -> str:
    """In ``zone`` (the report's, EXCHANGE_DISPLAY_TZ), to the second, without a zone suffix
    (the column label names the zone), as ``lang`` writes it: ``30.11.2026 11:00:00`` in
    Russian, ``2026-11-30 11:00:00`` in English (and in a CSV's cells: ``csv.py``)."""
    return moment(value, lang, ZoneInfo(zone)) if value else ""


def download_name(now: datetime, suffix: str, lang: Lang, zone: str = "UTC") -> str:
    """The name a report downloaded from the workbench is saved under: its time in the display
    zone, as ``lang`` writes it («карантин-05.12.2026-0750.xlsx»,
    ``quarantine-2026-12-05-0750.xlsx``). ``content_disposition`` says it to a browser."""
    local = now.astimezone(ZoneInfo(zone))
    when = local.strftime("%d.%m.%Y-%H%M" if lang == "ru" else "%Y-%m-%d-%H%M")
    return _("quarantine-{when}", lang).format(when=when) + suffix


def content_disposition(filename: str) -> str:
    """``attachment`` with ``filename``: an ASCII fallback for old clients and the exact
    (Cyrillic) name in RFC 6266's ``filename*``."""
    fallback = filename.encode("ascii", "replace").decode().replace("?", "_").replace('"', "_")
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


def kind_words(kind: str, lang: Lang) -> str:
    """A kind as a Russian report names it («цена», «финансовая проводка»); English, and a
    kind of EXCHANGE_KINDS's own, keep the code (what ``--kind`` takes)."""
    return name("kind", kind, lang) if lang == "ru" else kind


def yes_no(value: bool, lang: Lang) -> str:
    return label("yes" if value else "no", lang)


def describe_filters(report: Report, lang: Lang) -> str:
    """The filters the report was made with, in the report's language and its time format
    (``clock_time`` in the report's zone, which the label names): «Вид: price; Объект или
    артикул начинается с: ART-0; В карантине с (Europe/Moscow): 2026-11-30 11:00:00»."""
    f = report.filters
    parts = [
        f"{label(key, lang, report.zone)}: {value}"
        for key, value in (
            ("kind", f.kind),
            ("filter_aggregate", f.aggregate),
            ("filter_search", f.search),
            ("reason", f.reason),
            ("filter_since", clock_time(f.since, report.zone, lang) if f.since else None),
            ("filter_until", clock_time(f.until, report.zone, lang) if f.until else None),
        )
        if value is not None
    ]
    if f.superseded_after_quarantine:
        parts.append(label("filter_superseded", lang))
    return "; ".join(parts) if parts else label("no_filters", lang)


# -- rows shared by the spreadsheet formats --------------------------------------------------

Cell = str | int | float | datetime | None


def detail_columns(report: Report) -> tuple[str, ...]:
    """The detail table's columns: ``COLUMNS``, with ``channel`` after ``message_id`` where
    more than one channel is registered (contract 13); a one-channel installation's files
    keep the columns their readers know."""
    if not report.several_channels:
        return COLUMNS
    return (COLUMNS[0], "channel", *COLUMNS[1:])


def detail_row(
    entry: Entry,
    lang: Lang,
    steps: dict[str, str] | None = None,
    columns: tuple[str, ...] = COLUMNS,
) -> list[Cell]:
    """One entry in ``columns`` order (``detail_columns``); times stay datetimes (XLSX
    writes real dates)."""
    values: dict[str, Cell] = {
        "message_id": entry.message_id,
        "channel": entry.channel,
        "kind": kind_words(entry.kind, lang),
        "aggregate": entry.aggregate,
        "version": entry.version,
        "reason": entry.reason,
        "superseded_after_quarantine": yes_no(entry.superseded_after_quarantine, lang),
        "attempts": entry.attempts,
        "first_seen": entry.first_seen,
        "last_attempt": entry.last_attempt,
        "quarantined_at": entry.quarantined_at,
        "last_result": result_words(entry, lang),
        "next_check": entry_next_check(entry, lang, steps),
        "source_ref": entry.source_ref,
        "payload": entry.payload,
    }
    return [values[column] for column in columns]


def answer_said(http_status: int | None, error_class: str | None, lang: Lang) -> str | None:
    """A history row's HTTP column: the channel's HTTP status; without one, an English reader
    gets the service's error class (a code, as the English columns keep), a Russian one
    nothing: «InvalidForChannel» is an internal name, and the detail beside it says the cause
    in words (review mpadvice item 5)."""
    if http_status is not None:
        return str(http_status)
    return error_class if lang == "en" else None


def history_rows(entry: Entry, lang: Lang) -> list[list[Cell]]:
    """An entry's history in ``HISTORY_COLUMNS`` order; a Russian report names its events and
    states in words and says its details in Russian (the workbench's words: ``history_words``),
    an English one keeps the stored codes and texts."""
    return [
        [
            entry.message_id,
            e.at,
            *history_words(e.event, e.from_state, e.to_state, lang, waits, e.detail),
            e.worker,
            e.attempt,
            e.leased_at,
            e.lease_until,
            answer_said(e.http_status, e.error_class, lang),
            error_words(e.detail, lang) if e.detail else e.detail,
            e.operator,
            e.note,
        ]
        for e, waits in zip(entry.history, story_waits(entry.history), strict=True)
    ]


def story_waits(events: Sequence[HistoryEvent]) -> list[tuple[Wait, Wait]]:
    """For each of an entry's history rows (oldest first), what its delayed from- and
    to-state wait for: the channel (Ozon's hourly hold, Wildberries' wait behind its
    quarantine, Yandex Market's budget), 1C's other price type, or "" for a retry: the rule
    ``find``, ``status`` and ``history`` share."""
    return awaiting_in_story(
        (e.channel_id, e.event, e.from_state, e.to_state, e.error_class) for e in events
    )


def history_words(
    event: str,
    from_state: str | None,
    to_state: str | None,
    lang: Lang,
    awaits: tuple[Wait, Wait] = ("", ""),
    detail: str | None = None,
) -> tuple[str, str | None, str | None]:
    """A history row's event and states as a report says them: words in Russian, the stored
    codes in English (what ``exchange history --json`` and the logs say). ``awaits`` says
    what its delayed from- and to-state wait for (the channel, 1C, a person, or "" for a retry)
    (``exchange.ops.waits.awaiting_in_story``): said as a wait (``state_said``), never as a
    retry. ``detail``: the row's, which says whether a released attempt was sent with its
    answer unknown (``words.event_said``)."""
    if lang == "en":
        return event, from_state, to_state
    return (
        event_said(event, detail, lang),
        _state_waits(from_state, lang, awaits[0]),
        _state_waits(to_state, lang, awaits[1]),
    )


def _state_waits(state: str | None, lang: Lang, waits: Wait) -> str | None:
    if not state:
        return state
    return state_said(
        state, lang, awaiting=bool(waits), on_1c=waits == "1c", on_person=waits == "person"
    )


def summary_rows(report: Report, lang: Lang) -> list[tuple[str, Cell]]:
    """The summary as (label, value) pairs, in the order every format shows them."""
    s = report.summary
    return [
        (label("generated_at", lang, report.zone), report.generated_at),
        (label("filters", lang), describe_filters(report, lang)),
        (label("total", lang), s.total),
        (label("oldest_age", lang), human_age(s.oldest_age_s, lang)),
        (label("oldest_at", lang, report.zone), s.oldest_quarantined_at),
        (label("superseded_total", lang), s.superseded_after_quarantine),
        # Only where a channel withholds prices (contract 13): a report of an installation
        # without any keeps its rows as they were.
        *([(label("withheld", lang), report.withheld)] if report.withheld else []),
    ]


# -- neutralising cells for spreadsheets ------------------------------------------------------

# A spreadsheet runs a cell that starts with one of these as a formula (or, for tab/CR/LF,
# strips the whitespace and then does). The full-width forms are there because some
# spreadsheets fold them to ASCII before they look.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "＝", "＋", "－", "＠")
SPREADSHEET_CELL_MAX = 32_767  # Excel's limit; a longer value would spill or be cut silently
_NUL = re.compile("\x00")


def looks_like_formula(text: str) -> bool:
    return text.startswith(FORMULA_START)


def fit_cell(text: str, lang: Lang, limit: int = SPREADSHEET_CELL_MAX) -> str:
    """Cut a value that a spreadsheet cell cannot hold, and say so in the cell."""
    if len(text) <= limit:
        return text
    suffix = f" … [{label('truncated', lang)}: {len(text)}]"
    return text[: limit - len(suffix)] + suffix


def without_nul(text: str) -> str:
    return _NUL.sub("", text)


# Where a cell may start in a CSV file: at the start of the text, or after any character a
# spreadsheet may split at. Excel splits a file it opens on the list separator of the Windows
# locale, whichever the file used (``,`` in English, ``;`` in Russian); a quoted cell holding
# a separator is quoted for one of them only, and once split at the other its line breaks end
# the row. Spaces and double quotes before the formula are skipped the way a reader may.
_CELL_START = re.compile(
    r"(?:^|(?<=[,;\t\r\n]))(?=[ \"]*[" + re.escape("".join(FORMULA_START)) + "])"
)


def neutralise(text: str) -> str:
    """A CSV text cell that no spreadsheet runs, however it splits the line: an apostrophe
    before formula-like text (OWASP's CSV injection advice) wherever a cell may start
    (``x,=2+3`` is ``x,'=2+3``; the rest of the text is left as it was)."""
    return _CELL_START.sub("'", without_nul(text))
