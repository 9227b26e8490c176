"""The service's words: Russian first, English on request (``?lang=en``, kept in a cookie).

Every label a page shows comes from here, and every text of the service's own (an error, a
history detail, a 1C exchange's outcome) is said in Russian here, for the pages and the reports
alike (``error_words``); below the web and the report, above only the domain. The labels are
English messages marked for the catalog (``N_``; ``NP_`` where the same English needs different
Russian), their Russian in ``exchange/locale/ru/LC_MESSAGES/exchange.po`` beside every other
message: a translator edits one file (docs/translations.md). A label without its Russian is a
test failure (``tests/test_i18n.py``), never an English word on a Russian page.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal, InvalidOperation

from babel.numbers import format_currency, format_decimal

from exchange.i18n import LANGS, N_, NP_, _, ngettext, pgettext, say
from exchange.i18n import Lang as Lang  # the pages name it from here
from exchange.settings.channels import CHANNEL_TABLES_OF
from exchange.settings.marketplaces import MARKETPLACE_TARGETS

_WORD_MESSAGES: dict[str, str | tuple[str, str]] = {
    # the workbench's name: its channels may be a site and marketplaces alike (review 33)
    "title": N_("Exchange with 1C"),
    "dashboard": N_("Dashboard"),
    "quarantine": N_("Quarantine"),
    "find": N_("Find"),
    "blocked": N_("Blocked"),
    "exchanges": N_("1C exchanges"),
    "export": N_("Export"),
    "sign_in": N_("Sign in"),
    "sign_out": N_("Sign out"),
    "name": N_("Name"),
    "password": N_("Password"),
    "bad_login": N_("Wrong name or password"),
    "login_wait": N_("Too many sign-in attempts: try again in {seconds} s"),
    "signed_in_as": N_("Signed in as"),
    "role_viewer": N_("viewer"),
    "role_operator": N_("operator"),
    "figures": N_("Figures"),
    "new_messages": N_("New messages"),
    "held": N_("Held behind the quarantine"),
    "oldest": N_("Oldest undelivered"),
    "error_share": N_("Error share (15 min)"),
    "rate": N_("Delivered per minute (15 min)"),
    "last_day": N_("The last 24 hours: delivered (green) and failed attempts (red) per hour"),
    "by_state": N_("Messages by state"),
    # contract 13: with several channels the counts are deliveries, a message once on each
    "by_state_deliveries": N_("Deliveries by state (a message counts once on each channel)"),
    "state": N_("State"),
    "count": N_("Count"),
    "workers": N_("Workers"),
    "nothing_delivered": N_(
        "Nothing is being delivered: work waits and no worker is live (is exchange run running?)"
    ),
    # Work younger than the live window (max(lease, 3 x poll), contract 6) with no worker: a
    # worker's next poll away, not yet a cause; said in amber, never «нет работы».
    "no_live_worker_waits": N_(
        "No worker is live now, and work waits for delivery: the first worker to start takes it "
        "(is exchange run running?). If none starts within {seconds} s, it becomes a cause"
    ),
    # The same with a channel paused on its own (contract 13): its work waits for a person's
    # resume, whatever worker starts; the other channels' work waits for a worker.
    "no_live_worker_paused_wait": N_(
        "No worker is live now. The work of the channels paused on their own ({channels}) "
        "waits for an operator to resume them: a worker that starts takes none of it until then"
    ),
    "no_live_worker_others_wait": N_(
        "The other channels' work waits for a worker: the first to start takes it (is exchange "
        "run running?). If none starts within {seconds} s, it becomes a cause"
    ),
    "nothing_needs_yet": N_(
        "Nothing needs a person yet: work has waited for a worker under {seconds} s."
    ),
    "no_live_worker_idle": N_("No worker is live now; no work waits for delivery."),
    # Work waits only on channels no configured channel serves (a channel renamed in the
    # settings, ``attention.unserved``): no worker that starts takes it (issue 32).
    "no_live_worker_unserved": N_(
        "No worker is live now. Work waits on a channel no configured channel serves "
        "({channels}): no worker takes it, whichever starts, until that channel is configured "
        "again or dropped (see below)."
    ),
    # Said in the operator's pause banner too: both facts, the pause and no worker (the fresh
    # review: only the pause showed).
    "no_live_worker_too": N_(
        "No worker is live now: even after resuming, nothing will deliver (is exchange run "
        "running?)"
    ),
    "token_refused": N_("Delivery paused: the site refused the token"),
    "needs_person": N_("Needs a person"),
    "nothing_needs": N_("Nothing needs a person."),
    "untaken": N_("Received from 1C, not taken yet"),
    "untaken_oldest": N_("the oldest has waited {age}"),
    "onec_failed_24h": N_("1C exchanges failed in 24 h"),
    "onec_refused": N_("sign-ins refused since {since}: {count}"),
    "silent_since": N_("silent since {when}: delivers nothing"),
    "paused_by_row": N_("paused by operator {operator}"),
    # A channel's row with its own pause: who, when, and (after it, escaped) the note they
    # wrote on pausing (``exchange pause --channel NAME --note …``).
    "paused_by_row_since": N_("paused by operator {operator}, {when}"),
    # The breaker's state as the site's answers (issue 34 item 3: no «предохранитель»); a
    # half-open breaker's time is never shown (it lies in the past).
    "breaker_closed": N_("answers"),
    "breaker_open": N_("fails: paused"),
    "breaker_half-open": N_("checking whether it answers"),
    # The site gives this worker no answer at all (the facts the banner reads, issue 34):
    # never «отвечает», «идёт» or «перегружен» beside «Сайт не отвечает».
    "breaker_unreachable": N_("no answer since {when}"),
    "waits_for_site": N_("waits for the site to answer"),
    "pace_unreachable": N_("no answer: {failed} attempts failed in the last minute"),
    # A worker's row as it is (contract 15).
    "worker_stopped": N_("stopped {when}"),
    "worker_quiet": N_("silent since {when} (still counted live)"),
    # The site answers no live worker at all (refused connections, timeouts): never «Доставка
    # идёт» with an estimate at 0 requests/s.
    "site_unreachable": N_(
        "The site has not answered since {when}: prices wait and go by themselves as soon as it "
        "answers. If it stays silent, check that the site is up, or write to those who run it"
    ),
    # The same with EXCHANGE_CHANNELS (contract 13): every channel is silent, and "Needs a
    # person" names each.
    "channels_unreachable": N_(
        "No channel has answered since {when}: prices wait and go by themselves as soon as "
        "they answer. The channels are listed below under “Needs a person”"
    ),
    "last_told": N_("Operators last notified"),
    # A worker that stopped cleanly keeps its row marked stopped (``Worker.retire``).
    "last_stopped": N_("Worker {worker} stopped {ago} ({when}); no other is running"),
    # In-progress messages whose worker waits out the site's Retry-After (contract 5c): they
    # keep their lease but none is being sent (issue 34: «отправляется 44», «в работе 0»).
    "delayed_awaiting": N_("of which wait for the marketplace (not a retry)"),
    # The state's row in ``status`` where some of its deliveries wait rather than retry (the
    # rows below it): all of them, not "delayed (retry)" (review rev38b: «отложено (повтор)
    # 12» over «из них ждут 1С … 12»).
    "delayed_with_waits": N_("delayed: retries and waits"),
    # A price that alone breaks its marketplace's rule waits for 1C's other price type
    # (``ops.waits.wait_of``: "1c"): the wait is on 1C, not on the marketplace.
    # Many such waits end with the price going without its old price (not above it: no
    # discount, ``items._no_discount``); the others are quarantined (review rev40: "quarantined
    # if it does not come" said of every one; rev41: "where they break the rule without it"
    # said of 1380 beside 1400, which breaks it only with it).
    # A lone price of a pair waits a moment too (``items._settles``, review rev42 W1: the line
    # said it would be quarantined); it goes as it is.
    # Review rev43 W3: the line named the setting, not the seconds, and gave the 10-minute
    # wait no time.
    "delayed_awaiting_1c": N_(
        "of which wait for 1C: the other price type (if it does not come, a price taken in "
        "alone goes as it is within seconds, pair_settle; one that breaks a rule waits up to "
        "10 minutes, then, beside an old price not above it, goes without that old price, "
        "any other is quarantined)"
    ),
    # A new dependent price waits for an operator's retry or cancel of its SKU's main price,
    # quarantined by a rule of two price types (``ops.waits.wait_of``: "person"): the wait is
    # on a person, not on the marketplace nor on 1C.
    "delayed_awaiting_person": N_(
        "of which wait for an operator's decision on the quarantined main price"
    ),
    "in_progress_waiting": N_("of which wait: the site asked to wait until {until}"),
    # Said instead of "no other" when a worker's row is not live and not stopped (kill -9).
    "last_stopped_others": N_("Worker {worker} stopped {ago} ({when}); {others}"),
    "silent_others": N_("the others are not running either: {others}"),
    "silent_worker": N_("{worker} silent since {when}, delivers nothing"),
    "no_workers": N_("No worker reported in the last day"),
    "worker": N_("Worker"),
    "last_seen": N_("Last seen"),
    "breaker": N_("Site"),
    "delivery": N_("Delivery"),
    "running": N_("running"),
    "site_pace": N_("Site's pace and limit"),
    "paused": N_("paused"),
    "paused_by": N_("Delivery paused by operator"),
    "delivery_runs": N_("Delivery runs"),
    "pause": N_("Pause delivery"),
    "resume": N_("Resume delivery"),
    "pause_hint": N_("Every worker stops sending within one cycle."),
    "reason": N_("Reason"),
    "kind": N_("Kind"),
    "since": N_("Since (date)"),
    "until": N_("Until (date)"),
    "search": NP_("search", "Search"),
    "search_hint": N_("SKU, aggregate, 1C document, product or message_id prefix"),
    "filter": N_("Filter"),
    "any": NP_("any", "any"),
    "any_kind": NP_("any_kind", "any"),
    "message_id": N_("message_id"),
    "aggregate": NP_("aggregate", "Aggregate"),
    "version": N_("Version"),
    "attempts": N_("Attempts"),
    "last_error": N_("Last error"),
    "source_ref": N_("1C document"),
    "quarantined_at": N_("Quarantined at"),
    "empty_quarantine": N_("The quarantine is empty"),
    "nothing_found": N_("Nothing found"),
    "retry": N_("Retry"),
    "cancel": N_("Stop sending for good"),
    "retry_all": N_("Retry all filtered"),
    "cancel_all": N_("Cancel all filtered"),
    "preview": N_("What will happen"),
    "will_retry": N_("Will be sent again"),
    "will_cancel": N_("Will never be sent"),
    "skipped": N_("Will not be touched"),
    "preview_changed": N_(
        "Nothing was done: since the preview, the filter selects other messages. Check the list "
        "again and confirm again."
    ),
    "preview_added": N_("Added since the preview"),
    "preview_gone": N_("No longer selected"),
    "released": N_("After the cancel these later versions go out without the cancelled ones"),
    "released_row": N_("{count} version(s) from {first}"),
    "superseded_note": N_("a version at least as new was delivered: it ends stale, not sent"),
    "note": N_("Note (required)"),
    # The pause form's note, short enough to show whole in its field at 390 px (``required``
    # says it is needed).
    "pause_note": N_("Why pause"),
    "note_required": N_("A note is required: say why"),
    "confirm": N_("Confirm"),
    "done": N_("Done"),
    "touched": N_("touched: {count}"),
    # The id follows, after the colon (error.html's subject).
    "no_message": N_("No message with this message_id:"),
    "biography": N_("Message biography"),
    "at": N_("At"),
    "event": N_("Event"),
    "from_to": N_("Transition"),
    "detail": N_("Detail"),
    "operator": N_("Operator"),
    "attempt_lease": N_("Attempt, leased at"),
    "next_step": N_("What to do next"),
    # A quarantined price of which 1C has sent a newer version since: its advice is its own
    # (report.words.newer_advised), beside its reason on the quarantine's list.
    "newer_sent": N_("1C has sent a newer version since"),
    # ... where that one is in quarantine too: none goes in its place (review 36, item 4).
    "newer_held": N_("1C has sent a newer version since, but it is in quarantine too"),
    # ... where the marketplace withholds it in its own price quarantine (review rev36b).
    "newer_withheld": N_("1C has sent a newer version since, but the marketplace withholds it"),
    # A quarantined record superseded after quarantine: its advice is its own too (rev36b).
    "superseded_row": N_("superseded after quarantine: a newer version was delivered"),
    # A message page's empty facts, said with their meaning (a new message has no reason yet).
    "not_sent_yet": N_("— (not sent yet)"),
    "no_reason": N_("— (waits for no operator's decision)"),
    "no_error": N_("— (none)"),
    "no_source_ref": N_("— (not given)"),
    # The steps «Что сделать» names, as a page says them: its buttons, never a command
    # (report.words.next_check's ``steps``).
    "step_press": N_("press “{button}”"),
    # The same steps in a file the workbench exported: a file has no buttons, so it says
    # where they are (a workbench export names no command: its reader may have none).
    "step_place_file": N_("on the workbench's Quarantine page"),
    "step_history_file": N_("the message's history on its page on the workbench"),
    "step_restart": N_("restart the delivery workers so that they read the setting,"),
    "step_history": N_("the message's history on its page"),
    # where a person decides on a price the channel withholds: the workbench's list of them
    # (report.words._INVALID_NEWER_WITHHELD), named by its title (``list_withheld``)
    "step_withheld": N_("the list “{title}”"),
    "step_withheld_file": N_("the list “{title}” on the workbench"),
    "payload": NP_("payload", "Payload"),
    "cause": N_("Cause"),
    "blocked_by_quarantine": N_("the next version is quarantined: retry or cancel it"),
    "blocked_by_gap": N_("waits for version {version}: a gap"),
    "blocked_by_kept": N_(
        "waits for version {version}, kept on no channel: exchange channels seed {name} "
        "--from {first}"
    ),
    "delivered_through": N_("Delivered through"),
    "none": N_("none"),
    "file": N_("File"),
    "outcome": N_("Outcome"),
    "intents": N_("Prices"),
    "not_sent": N_("Not sent"),
    "started": N_("Started"),
    "broker_refused": N_("Bad messages from the brokers"),
    "broker_refused_about": N_(
        "Messages from RabbitMQ and Redis that could not be taken as prices: they are "
        "quarantined, acknowledged to the broker and will not come again. Fix what 1C sends."
    ),
    "prioritize": N_("Put first"),
    "prioritize_about": N_(
        "This message goes before the whole backlog: only its place in the queue changes; the "
        "site's pace, a pause, the breaker and the order of postings still hold."
    ),
    "received_at": N_("Received"),
    "source": N_("Source"),
    "message": N_("Message"),
    "format": N_("Format"),
    "download": N_("Download"),
    "forbidden": N_("Not allowed"),
    "viewer_note": N_("Role viewer: actions are not available."),
    "times_in": N_("Times are in {zone}"),
    "bad_filter": N_("Unknown filter value"),
    "bad_sort": N_("Unknown sort order (the list is shown in its default order)"),
    "bad_date": N_("Not a date (e.g. 30.11.2026 or 2026-11-30)"),
    # -- search, the quarantine's list, cancel (issue 24, items 5-7) ------------------------
    "price": N_("Price"),
    "received": N_("Received"),
    "product": N_("Product"),
    "found_count": N_("Found: {count}"),
    "found_pages": N_("{shown} a page, the newest first"),
    "find_hint": N_(
        "The beginning of a SKU (and of a 1C article, where the shop's SKUs are 1C ids), an "
        "aggregate, a message_id, or of any word of a 1C document (e.g. offers.xml) or a product "
        "name"
    ),
    "prices_from_file": N_("prices from this file: {count}"),
    # A failed exchange's row: nothing of the file was staged (why: its detail).
    "file_not_staged": N_("file refused: nothing staged"),
    "in_quarantine_since": N_("In quarantine since / waiting"),
    "select_page": N_("whole page"),
    "act_on": N_("Act on"),
    "act_on_checked": N_("the rows checked (or the whole page: the box in the table's header)"),
    "act_on_all": N_("all {count} matching the filters"),
    # Said where ``act_on_all`` is absent: it is offered only once a filter is chosen.
    "act_on_all_hint": N_("Choose a filter to act on all the rows matching it"),
    "nothing_selected": N_(
        "Nothing is selected: check messages in the list, the whole page (the box in the header) "
        "or all matching the filters, then press the button again."
    ),
    "per_page": N_("Per page"),
    "page_of": N_("Page {page} of {pages}"),
    "page_prev": N_("Previous"),
    "page_next": N_("Next"),
    "page_first": N_("to the first page"),
    "back": N_("Back"),
    # -- the lists by state (issue 34 item 6) -----------------------------------------------
    "list_new": N_("Waiting to be sent"),
    "list_delayed": N_("Delayed until the next try"),
    "list_in_progress": N_("Being sent now"),
    "list_delivered": NP_("list_delivered", "Delivered"),
    "list_cancelled": N_("Cancelled"),
    "list_withheld": N_("Taken by the channel, withheld from buyers"),
    "lists": N_("Lists"),
    # -- the message's page (issue 34 item 9) ----------------------------------------------
    "in_state_line": N_("{state} since {when} ({ago})"),
    # Several channels: a message has a state on each, none of its own (issue 31 item 7).
    "states_on_channels": N_("On the channels: {states}"),
    "done_prioritize": N_("Done: the message is first in the queue."),
    "done_release": N_("Done: the channel was asked to show the price to buyers."),
    "release": N_("Release to buyers"),
    "release_about": N_(
        "The channel took this price but withholds it from buyers until a person confirms it. "
        "Release asks the channel to show it, where the channel has a way; otherwise it says "
        "where the seller must act (the channel's cabinet, or a new price)."
    ),
    "withheld_waits": N_(
        "— (waits for a person: the channel said “{said}”; «{button}» asks it to show the "
        "price to buyers, else confirm it in the channel's cabinet or send a new price)"
    ),
    # ``ops.withheld_behind``: a newer price waits behind this withheld one (Wildberries)
    "withheld_behind": N_("— (do not confirm this price in the channel's cabinet: {said})"),
    "your_note": N_("Your note (not saved)"),
    "in_state_since": N_("In this state since"),
    "next_try": N_("Next try"),
    "due_in": N_("in {age}"),
    "due_now": N_("due now: waits for a worker"),
    "lease_of": N_("Worker"),
    "no_state": N_("No such list of messages"),
    "counted_more": N_(
        "more than {count}: the first {count} can be paged, the rest by narrowing the filters"
    ),
    "empty_list": N_("No such messages."),
    "file_refused_at_intake": N_("refused at intake (quarantine): {count}"),
    "file_waits_worker": N_("not yet taken by a worker: {count}"),
    "cancel_never_sent_one": N_(
        "This version will never be sent to the site. The message stays in the history."
    ),
    "cancel_never_sent_many": N_(
        "These versions will never be sent to the site. The messages stay in the history."
    ),
    "cancel_behind": N_(
        "Waiting behind them: {count}. After this they go to the site without the ones stopped."
    ),
    "cancel_nothing_behind": N_("No later version waits behind them."),
    # The same for one message: "it", not "them" («за ней», not «за ними»).
    "cancel_behind_one": N_(
        "Waiting behind it: {count}. After this they go to the site without the one stopped."
    ),
    "cancel_nothing_behind_one": N_("No later version waits behind it."),
}


class _Words(Mapping[str, dict[Lang, str]]):
    """``WORDS[key][lang]``: a page's label in each language, read from the catalogs (the table
    above holds the English messages only)."""

    def __getitem__(self, key: str) -> dict[Lang, str]:
        message = _WORD_MESSAGES[key]
        return {lang: say(message, lang) for lang in LANGS}

    def __iter__(self) -> Iterator[str]:
        return iter(_WORD_MESSAGES)

    def __len__(self) -> int:
        return len(_WORD_MESSAGES)


WORDS: Mapping[str, dict[Lang, str]] = _Words()


def word(key: str, lang: Lang) -> str:
    """The label ``key`` in ``lang``."""
    return say(_WORD_MESSAGES[key], lang)


def money(price: str | None, currency: str | None, lang: Lang) -> str:
    """A price as its readers write it (CLDR through Babel): «1 234,50 ₽» in Russian, at least
    the currency's digits and never fewer than the price has (never rounded: the page shows
    what goes to the shop). Text that is not a number is shown as it is, with its currency."""
    if price is None:
        return ""
    try:
        amount = Decimal(price)
    except (InvalidOperation, ValueError):
        amount = None
    as_is = f"{price} {currency or ''}".strip()
    # Past 20 digits a price is a record's fault, never a price (a million zeros unrolled).
    if amount is None or not amount.is_finite() or abs(amount.adjusted()) > 20:
        return as_is
    try:
        if not currency:
            return format_decimal(amount, locale=lang, decimal_quantization=False)
        said = format_currency(amount, currency, locale=lang, decimal_quantization=False)
    except (InvalidOperation, ValueError):  # more digits than a Decimal context holds
        return as_is
    # CLDR's currency spacing, which Babel leaves out: a code written before the number is
    # parted from it («RUB 1,234.50», never "RUB1,234.50"); a sign (₽, $) stays close.
    return _CODE_BEFORE_DIGIT.sub("\\1\u00a0\\2", said)


_CODE_BEFORE_DIGIT = re.compile(r"^(-?[A-Za-z]+)(\d)")


_ONEC_SOURCE = re.compile(
    r"1C exchange (?P<file>.+?)(?: (?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})(?:T(?P<t>[\d:]+))?)?"
)


def source_words(ref: str | None, lang: Lang) -> str:
    """A message's ``source_ref`` as a page says it. The 1C exchange's own (``1C exchange
    offers.xml 2026-12-05T06:00:00``, commerceml/publish.py, kept English where it is stored and
    searched) reads in Russian «Обмен с 1С: offers.xml от 05.12.2026 06:00:00»; any other (a
    sending system's own text) as it is."""
    if not ref or lang == "en":
        return ref or ""
    found = _ONEC_SOURCE.fullmatch(ref)
    if found is None:
        return ref
    said = _("1C exchange: {file}", lang).format(file=found["file"])
    if found["y"]:
        when = f"{found['d']}.{found['m']}.{found['y']}" + (f" {found['t']}" if found["t"] else "")
        said = _("{exchange} of {when}", lang).format(exchange=said, when=when)
    return said


def unset_fact(fact: str, attempted: bool, lang: Lang) -> str:
    """What an empty ``reason`` or ``last_error`` of a message means, said the same on its
    page and in the search's rows: never sent yet, or sent and waiting for no operator's
    decision / sent without an error."""
    if not attempted:
        return word("not_sent_yet", lang)
    return word({"reason": "no_reason", "last_error": "no_error"}[fact], lang)


def page_steps(lang: Lang) -> dict[str, str]:
    """The steps of «Что сделать» (``report.words.STEP_NAMES``) as a page says them: press
    its button, never run a command."""
    return {
        "retry": word("step_press", lang).format(button=word("retry", lang)),
        "cancel": word("step_press", lang).format(button=word("cancel", lang)),
        "restart": word("step_restart", lang),
        "history": word("step_history", lang),
        "withheld": word("step_withheld", lang).format(title=word("list_withheld", lang)),
    }


def file_steps(lang: Lang) -> dict[str, str]:
    """The steps of «Что сделать» in a file the workbench exported: a file has no buttons, so
    the advice says once where its buttons are (``report.words.PLACE``)."""
    return {
        **page_steps(lang),
        "history": word("step_history_file", lang),
        "withheld": word("step_withheld_file", lang).format(title=word("list_withheld", lang)),
        "place": word("step_place_file", lang),
    }


# The codes the service stores, as a page names them: states and events in words; a reason
# keeps its code beside its Russian name (the code is what `--reason` and the filter take).
NAMES: dict[str, dict[str, tuple[str, str]]] = {
    "state": {
        "new": NP_("state", "new"),
        "in_progress": NP_("state", "in progress"),
        "delivered": NP_("state", "delivered"),
        "delayed": NP_("state", "delayed"),
        # a delayed delivery that waits for its channel, not for a retry (exchange.ops.waits)
        "awaiting": NP_("state", "waiting for the marketplace"),
        # a wait on 1C's other price type (``ops.waits.wait_of``), not on the marketplace
        "awaiting-1c": NP_("state", "waiting for 1C: the other price type"),
        # a wait on an operator's retry or cancel of the main price quarantined by a rule of
        # two price types (``ops.waits.wait_of``: "person"), not on the marketplace
        "awaiting-person": NP_("state", "waiting for an operator's decision on the main price"),
        "quarantined": NP_("state", "quarantined"),
        "cancelled": NP_("state", "cancelled"),
        "withheld": NP_("state", "withheld by the channel"),
    },
    "event": {
        "taken": NP_("event", "taken"),
        "duplicate": NP_("event", "duplicate"),
        "rejected": NP_("event", "rejected"),
        "superseded": NP_("event", "superseded"),
        "stale": NP_("event", "stale"),
        "sequence-gap": NP_("event", "sequence gap"),
        "leased": NP_("event", "leased"),
        "taken-over": NP_("event", "taken over"),
        "delivered": NP_("event", "delivered"),
        "stale-at-site": NP_("event", "stale at the site"),
        "retry-scheduled": NP_("event", "retry scheduled"),
        "quarantined": NP_("event", "quarantined"),
        "released": NP_("event", "released"),
        # a released attempt whose request went out and got no answer (``event_said``)
        "released-unknown": NP_("event", "sent, answer unknown: sent again, not charged"),
        # such an attempt whose upload the channel may still apply (a Wildberries upload whose
        # answer was lost: ``WildberriesTarget._may_apply``): the next attempt waits to learn
        # whether it applied it, never sends it again (seller review 35)
        "released-unknown-waits": NP_(
            "event",
            "sent, answer unknown: waits until the channel shows whether it applied the upload, "
            "not charged",
        ),
        # a released attempt the site or marketplace answered with its pace refusal (a 429,
        # Ozon's code 8: ``domain.retry``'s "… busy, not charged: …", ``event_said``)
        "released-busy": NP_("event", "sent, answered busy: sent again later, not charged"),
        # such an attempt whose upload the channel may have applied all the same (a Wildberries
        # 5xx: ``WildberriesTarget._may_apply``): the next attempt waits to learn, never resends
        "released-may-apply": NP_(
            "event",
            "sent, answered busy: waits until the channel shows whether it applied the upload, "
            "not charged",
        ),
        "lease-expired": NP_("event", "lease expired"),
        "operator-retry": NP_("event", "operator retry"),
        "operator-cancel": NP_("event", "operator cancel"),
        "not-for-this-shop": NP_("event", "not for this channel"),
        "operator-prioritize": NP_("event", "put first by an operator"),
        "seeded": NP_("event", "seeded to a new channel"),
        "channel-removed": NP_("event", "channel removed"),
        "withheld": NP_("event", "withheld by the channel"),
        "withheld-live": NP_("event", "shown to buyers"),
        # a person's ask: the state moves only when the channel shows the version (its detail says
        # where the channel did not release it)
        "operator-release": NP_("event", "an operator asked to release"),
        "awaiting-outcome": NP_("event", "awaiting the channel's outcome"),
        # such a wait whose detail says it is on 1C's next package (``items._waits_for_1c``) or
        # on a person (``items._waits_for_person``), not on the channel (review rev40: history
        # said «ждёт результата от канала» for a wait for 1C)
        "awaiting-1c": NP_("event", "awaiting 1C's other price type"),
        "awaiting-person": NP_("event", "awaiting an operator's decision on the main price"),
        # a note on a version that ended: its send, whose answer was lost, found at the channel
        "lost-send-found": NP_("event", "its lost send found at the channel"),
    },
    # The kinds of contract 3 (and EXCHANGE_KINDS's own, shown by their code).
    "kind": {
        "price": NP_("kind", "price"),
        "financial_posting": NP_("kind", "financial posting"),
    },
    "source": {
        "rabbitmq": NP_("source", "RabbitMQ"),
        "redis": NP_("source", "Redis Streams"),
    },
    "outcome": {
        "staged": NP_("outcome", "staged"),
        "nothing-new": NP_("outcome", "nothing new"),
        "catalogue": NP_("outcome", "catalogue"),
        # An offers file without a price to stage, an unpacked archive, a file that is not XML.
        "nothing": NP_("outcome", "nothing to stage"),
        "failure": NP_("outcome", "failure"),
        "interrupted": NP_("outcome", "interrupted"),
        "working": NP_("outcome", "working"),
    },
    # What a channel is (contract 13: an operator's words name a channel by its name and
    # this, «канал ozon (Ozon)»): its target, as a shop owner calls it.
    "target": {
        "api": NP_("target", "site"),
        "woocommerce": NP_("target", "WooCommerce"),
        "bitrix": NP_("target", "1C-Bitrix"),
        "rabbitmq": NP_("target", "RabbitMQ"),
        "ozon": NP_("target", "Ozon"),
        "wildberries": NP_("target", "Wildberries"),
        "yandex-market": NP_("target", "Yandex Market"),
    },
    "held_by": {
        "quarantine": NP_("held_by", "the quarantine"),
        "gap": NP_("held_by", "a gap"),
        "kept": NP_("held_by", "a version kept on no channel"),
    },
    "reason": {
        "invalid-contract": NP_("reason", "invalid data"),
        "unsupported-schema": NP_("reason", "unsupported schema"),
        "unknown-kind": NP_("reason", "unknown kind"),
        "version-conflict": NP_("reason", "version conflict"),
        "sequence-gap": NP_("reason", "sequence gap"),
        "retry-limit": NP_("reason", "retry limit"),
        "unknown-response": NP_("reason", "unknown response"),
        "superseded": NP_("reason", "superseded"),
        "stale": NP_("reason", "stale"),
        "stale-at-site": NP_("reason", "stale at the site"),
        "operator": NP_("reason", "operator"),
        "unknown-sku": NP_("reason", "unknown SKU"),
        "unmapped-price-type": NP_("reason", "unmapped price type"),
        "shop-failure": NP_("reason", "shop failure"),
        "not-for-this-shop": NP_("reason", "not for this channel"),
        "unroutable": NP_("reason", "unroutable"),
        "invalid-for-channel": NP_("reason", "invalid for the channel"),
        "channel-rule": NP_("reason", "the channel's price rule"),
        "channel-removed": NP_("reason", "channel removed"),
    },
    # A reason on a marketplace's channel where the site's words would be wrong (a marketplace
    # is no site, contract 14): ``name`` with a ``target`` of ``MARKETPLACE_TARGETS``.
    "reason-marketplace": {
        "unknown-response": NP_("reason", "unknown response of the marketplace"),
        "http-": NP_("reason", "rejected by the marketplace"),
        # A marketplace has no shop: its offer missing from the marketplace's catalogue (the
        # advice, ``report.words``, says the same; review wbcat finding 2).
        "unknown-sku": NP_("reason", "not in the marketplace's catalogue"),
    },
}


def on_marketplace(target: str | None) -> bool:
    """Whether a channel of ``target`` is a marketplace, whose words never say "the site"
    (contract 14): the one rule the reasons, their advice and ``verify``'s columns share with
    the busy words (``channel_subject``)."""
    return target in MARKETPLACE_TARGETS


def reason_target(targets: Iterable[str | None]) -> str | None:
    """The target whose words one row for several records of a reason takes (a summary's row,
    the dashboard's, ``status``'s; given to ``name`` and the advice, ``report.words.
    next_check``): the one target they share; a marketplace's where every record is on a
    marketplace's channel (their words are one: «площадка», never a marketplace's name);
    None where a site's record is among them, or an intake's record (no channel's)."""
    found = set(targets)
    if len(found) == 1:
        return found.pop()
    if found and all(on_marketplace(target) for target in found):
        return min(t for t in found if t is not None)
    return None


def name(group: str, code: str | None, lang: Lang, target: str | None = None) -> str:
    """A stored code as a page shows it: ``state`` and ``event`` in words, a ``reason`` as its
    name with the code beside it («сайт отклонил (http-422)»); an unknown code as it is. A
    reason of a marketplace's channel (``target``, ``on_marketplace``) names the marketplace
    where the site's words would («площадка отклонила (http-400)»)."""
    if not code:
        return ""
    if group == "reason" and on_marketplace(target):
        own = NAMES["reason-marketplace"].get("http-" if code.startswith("http-") else code)
        if own is not None:
            return f"{say(own, lang)} ({code})"
    if group == "reason":
        if code.startswith("http-"):
            said = pgettext("reason", "rejected by the site", lang)
        else:
            known = NAMES["reason"].get(code)
            said = say(known, lang) if known is not None else ""
        return f"{said} ({code})" if said else code
    known = NAMES[group].get(code)
    return say(known, lang) if known is not None else code


# The service's own error texts (exchange/ops, the settings, the command line: English in the
# exception and the log) as a person reads them in Russian: each English pattern beside its
# message, marked for the catalog (exchange/locale/ru/LC_MESSAGES/exchange.po), its ``{name}``s
# the pattern's groups. A group named ``count`` is a count of messages («2 сообщения»),
# ``state`` a state's name, ``states`` "m-1 is cancelled, …" with each state named, ``why``
# what the system answered (an OS error in Russian when it is a known one), ``parts`` the
# settings' problems one by one. Codes, ids, setting names and paths stay as they are; a text
# that matches none is shown as it is.
_ERRORS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.DOTALL), message)
    for pattern, message in (
        # exchange/ops/quarantine.py
        (
            r"a bulk (?P<action>\w+) needs at least one filter \((?P<options>[^)]*)\).*",
            N_("a bulk {action} needs at least one filter ({options})"),
        ),
        (
            r"give message ids or filters to (?P<action>\w+), not both",
            N_("give message ids or filters to {action}, not both"),
        ),
        (
            r"a bulk (?P<action>\w+) would touch (?P<count>\d+) messages, more than the limit of "
            r"(?P<limit>\d+).*",
            N_("a bulk {action} would touch {count}, more than the limit of {limit}"),
        ),
        (r"no such message: (?P<ids>.*)", N_("no such message: {ids}")),
        (
            r"only quarantined messages can be changed: (?P<states>.*)",
            N_("only quarantined messages can be changed: {states}"),
        ),
        (
            r"only withheld messages can be released: (?P<ids>.*) (is|are) withheld on no "
            r"channel",
            N_("only withheld messages can be released: no channel withholds {ids}"),
        ),
        (
            r"only withheld messages can be released: (?P<states>.*)",
            N_("only withheld messages can be released: {states}"),
        ),
        (
            r"--note is required: say why the price is released",
            N_("--note is required: say why the price is released"),
        ),
        (r"name at least one withheld message", N_("name at least one withheld message")),
        (
            # exchange/delivery/withheld.py: a newer version not delivered yet (review ym34)
            r"a newer price from 1C waits to go to this channel after the withheld one, not "
            r"delivered yet: (?P<pairs>.*); releasing the older could put it live over the "
            r"newer: let the newer land \(exchange status says what it waits for\), or release "
            r"the newest when the channel withholds it",
            N_(
                "a newer price from 1C waits to go to this channel after the withheld one, not "
                "delivered yet: {pairs}; releasing the older could put it live over the newer: "
                "let the newer land (exchange status says what it waits for), or release the "
                "newest when the channel withholds it"
            ),
        ),
        (
            # exchange/delivery/withheld.py: a newer version the channel accepted, not shown
            # yet, maybe held by its quarantine too (words38 item 6)
            r"a newer price from 1C was accepted by this channel after the withheld one and is "
            r"not shown to buyers yet: (?P<pairs>.*); the channel may be holding it in its price "
            r"quarantine too \(it is then withheld within a minute or so\): releasing the older "
            r"could put it live over the newer: look again in a minute \(exchange withheld "
            r"list\), and release the newest when the channel withholds it",
            N_(
                "a newer price from 1C was accepted by this channel after the withheld one and "
                "is not shown to buyers yet: {pairs}; the channel may be holding it in its price "
                "quarantine too (it is then withheld within a minute or so): releasing the older "
                "could put it live over the newer: look again in a minute (exchange withheld "
                "list), and release the newest when the channel withholds it"
            ),
        ),
        (
            # exchange/delivery/withheld.py: a newer version still in staging (review release36)
            r"a newer price from 1C is received, not taken in yet: (?P<pairs>.*); releasing the "
            r"older could put it live over the newer: let the service take it in \(exchange "
            r"status: received from 1C, not taken yet\) and let it land, or release the newest "
            r"when the channel withholds it",
            N_(
                "a newer price from 1C is received, not taken in yet: {pairs}; releasing the "
                "older could put it live over the newer: let the service take it in (exchange "
                "status: received from 1C, not taken yet) and let it land, or release the "
                "newest when the channel withholds it"
            ),
        ),
        (
            # exchange/delivery/withheld.py: a release of a superseded version (review 32)
            r"a newer price went to this channel after the withheld one: (?P<pairs>.*); "
            r"releasing the older could put it live over the newer: release the newest when "
            r"the channel withholds it, or let it land",
            N_(
                "a newer price went to this channel after the withheld one: {pairs}; releasing "
                "the older could put it live over the newer: release the newest when the "
                "channel withholds it, or let it land"
            ),
        ),
        (
            # exchange/delivery/withheld.py: a release naming no channel (issue 32)
            r"--channel is required: withheld on (?P<names>.*); name the channel to release on",
            N_("--channel is required: withheld on {names}; name the channel to release on"),
        ),
        (
            # exchange/ops/verify.py: ``verify --channel`` of a dropped channel (issue 32)
            r"channel (?P<name>\S+) was dropped (?P<when>.+?) by (?P<operator>.+?): nothing is "
            r"delivered to it any more; verify a channel configured now \((?P<names>.*)\), or "
            r"configure it again and give it every current price: exchange channels seed \S+",
            N_(
                "channel {name} was dropped {when} by {operator}: nothing is delivered to it any "
                "more; verify a channel configured now ({names}), or configure it again and give "
                "it every current price: exchange channels seed {name}"
            ),
        ),
        (
            r"channel (?P<name>\S+) was dropped (?P<when>.+?): nothing is delivered to it any "
            r"more; verify a channel configured now \((?P<names>.*)\), or configure it again "
            r"and give it every current price: exchange channels seed \S+",
            N_(
                "channel {name} was dropped {when}: nothing is delivered to it any more; verify a "
                "channel configured now ({names}), or configure it again and give it every "
                "current price: exchange channels seed {name}"
            ),
        ),
        (
            r"--channel is required: this installation has (?P<names>.*)",
            N_("--channel is required: this installation has {names}"),
        ),
        (
            r"no channel (?P<name>\S+) is configured here \(configured: (?P<names>.*)\)",
            N_("no channel {name} is configured here (configured: {names})"),
        ),
        (
            r"(?P<id>\S+): a rejected staging row cannot be replayed.*",
            N_("{id}: a rejected staging row cannot be replayed"),
        ),
        (
            r"a rejected staging row cannot be replayed.*",
            N_("a rejected staging row cannot be replayed"),
        ),
        (
            r"unknown sort (?P<sort>.+): one of (?P<sorts>.+)",
            N_("unknown sort {sort}: one of {sorts}"),
        ),
        (
            r"--note is required: say why the message is cancelled",
            N_("--note is required: say why the message is cancelled"),
        ),
        (
            r"a cancel needs a note: why it ends for good",
            N_("a cancel needs a note: why it ends for good"),
        ),
        (
            r"unknown action (?P<action>.+): retry or cancel",
            N_("unknown action {action}: retry or cancel"),
        ),
        # exchange/db/channels.py, exchange/queue/channels.py
        (
            r"channel (?P<name>\S+) is registered with target (?P<registered>\S+), configured "
            r"with (?P<configured>\S+): .*",
            N_(
                "channel {name} is registered with target {registered}, configured with "
                "{configured}: a channel keeps its target; drop it first (exchange channels "
                "drop {name} --note …) or give the new one another name"
            ),
        ),
        (
            r"no channel (?P<name>\S+) is in use: .*",
            N_("no channel {name} is in use: `exchange channels list` shows the registered ones"),
        ),
        (
            r"--note is required: say why the channel is removed",
            N_("--note is required: say why the channel is removed"),
        ),
        (
            r"--from (?P<id>\S+) would skip an earlier version kept on no channel \(the first "
            r"(?P<first>\S+)\) and give (?P<name>\S+) the later ones without it: .*",
            N_(
                "--from {id} would skip an earlier version kept on no channel (the first "
                "{first}) and give {name} the later ones without it: exchange channels seed "
                "{name} --from {first}"
            ),
        ),
        # a seed's history row (exchange/queue/channels.py)
        (r"seeded to channel (?P<name>\S+)", N_("seeded to channel {name}")),
        # exchange/ops/find.py
        (
            r"unknown reason (?P<reason>.+): one of (?P<reasons>.+) or http-NNN",
            N_("unknown reason {reason}: one of {reasons} or http-NNN"),
        ),
        (
            r"unknown kind (?P<kind>.+): one of (?P<kinds>.+)",
            N_("unknown kind {kind}: one of {kinds}"),
        ),
        # exchange/db/on_channels.py
        (
            r"unknown channel (?P<channel>.+): one of (?P<channels>.+)",
            N_("unknown channel {channel}: one of {channels}"),
        ),
        # exchange/ops/prioritize.py
        (
            r"(?P<id>\S+) is (?P<state>\S+): only a message waiting to be sent \(new or "
            r"delayed\) can be put first",
            N_(
                "{id} is {state}: only a message waiting to be sent (new or delayed) can be put "
                "first"
            ),
        ),
        (
            r"--note is required: say why these go first",
            N_("--note is required: say why these go first"),
        ),
        (
            r"name at least one message_id or price aggregate",
            N_("name at least one message_id or price aggregate"),
        ),
        (
            r"(?P<term>.+): no message has this id, and no price of this aggregate is waiting "
            r"\(new or delayed\)",
            N_(
                "{term}: no message has this id, and no price of this aggregate is waiting (new "
                "or delayed)"
            ),
        ),
        # exchange/ops/status.py, exchange/cli/reading.py
        (r"no message with id (?P<id>.+)", N_("no message with id {id}")),
        (
            r"(?P<term>.+) matches (?P<count>\d+) messages: give one of the ids above",
            N_("{term} matches {count}: give one of the ids above"),
        ),
        # exchange/ops/operators.py, exchange/cli/people.py
        (
            r"an operator's name is 1-100 printable characters without spaces",
            N_("an operator's name is 1-100 printable characters without spaces"),
        ),
        (
            r"unknown role (?P<role>.+): viewer or operator",
            N_("unknown role {role}: viewer or operator"),
        ),
        (
            r"the password is too short: at least (?P<n>\d+) characters",
            N_("the password is too short: at least {n} characters"),
        ),
        (r"no operator named (?P<name>.+)", N_("no operator named {name}")),
        (r"the two passwords differ", N_("the two passwords differ")),
        # exchange/ops/verify.py, exchange/cli/verifying.py
        # (the place the channels were written: ``Settings.channels_source``, said by
        # ``channels_source_words``)
        (
            r"give --channel NAME: the channels are (?P<names>'.*') \((?P<source>.+)\)",
            N_("give --channel NAME: the channels are {names} ({source})"),
        ),
        (
            r"no channel (?P<channel>'.*?'): the one channel is (?P<target>'.*') "
            r"\((?P<source>.+)\)",
            N_("no channel {channel}: the one channel is {target} ({source})"),
        ),
        (
            r"no channel (?P<channel>'.*?'): the channels are (?P<names>'.*') \((?P<source>.+)\)",
            N_("no channel {channel}: the channels are {names} ({source})"),
        ),
        (
            r"the (?P<target>\S+) target cannot read a price back from the shop \(its protocol "
            r"has no way to\): exchange verify reads prices back from woocommerce, ozon, "
            r"wildberries and yandex-market",
            N_(
                "the {target} target cannot read a price back from the shop (its protocol has no "
                "way to): exchange verify reads prices back from woocommerce, ozon, wildberries "
                "and yandex-market"
            ),
        ),
        (
            r"--sample and --sku choose the prices two ways: give one",
            N_("--sample and --sku choose the prices two ways: give one"),
        ),
        # exchange/cli/control.py, exchange/cli/quarantine.py
        (
            r"notifications are off: set EXCHANGE_NOTIFY_SMTP_HOST \(e-mail\) or "
            r"EXCHANGE_NOTIFY_TELEGRAM_TOKEN \(Telegram\)",
            N_(
                "notifications are off: set EXCHANGE_NOTIFY_SMTP_HOST (e-mail) or "
                "EXCHANGE_NOTIFY_TELEGRAM_TOKEN (Telegram)"
            ),
        ),
        (r"cannot write (?P<path>.+?): (?P<why>[^:]+)", N_("cannot write {path}: {why}")),
        # exchange/dev
        (
            r"cannot prepare the demo directory (?P<path>.+?): (?P<why>[^:]+)",
            N_("cannot prepare the demo directory {path}: {why}"),
        ),
        (
            r"demo --target rabbitmq needs the brokers extra: (?P<command>.+)",
            N_("demo --target rabbitmq needs the brokers extra: {command}"),
        ),
        (
            r"--target must be api, bitrix, woocommerce or rabbitmq, not (?P<target>.+)",
            N_("--target must be api, bitrix, woocommerce or rabbitmq, not {target}"),
        ),
        # exchange/dev/catalogue.py and exchange demo --catalogue (the owner's rehearsal)
        (
            r"the catalogue (?P<path>.+?) cannot be read: (?P<why>[^:]+)",
            N_("the catalogue {path} cannot be read: {why}"),
        ),
        (
            r"the catalogue (?P<path>.+?) is not UTF-8 text",
            N_("the catalogue {path} is not UTF-8 text"),
        ),
        (r"the catalogue (?P<path>.+?) names no SKU", N_("the catalogue {path} names no SKU")),
        (
            r"(?P<path>.+), row (?P<row>\d+): fewer cells than the header names",
            N_("{path}, row {row}: fewer cells than the header names"),
        ),
        (
            r"--channels runs its own shops: it takes neither --target nor --catalogue",
            N_("--channels runs its own shops: it takes neither --target nor --catalogue"),
        ),
        (
            r"--catalogue is for --target api or woocommerce: (?P<target>\w+) cannot say which "
            r"SKUs the shop lacks",
            N_(
                "--catalogue is for --target api or woocommerce: {target} cannot say which SKUs "
                "the shop lacks"
            ),
        ),
        (
            r"RabbitMQ does not answer at (?P<url>\S+) \((?P<error>\w+)\): start one, or set "
            r"EXCHANGE_RABBITMQ_URL",
            N_(
                "RabbitMQ does not answer at {url} ({error}): start one, or set "
                "EXCHANGE_RABBITMQ_URL"
            ),
        ),
        # exchange/db
        (
            r"the database is not migrated: run `exchange migrate` first",
            N_("the database is not migrated: run `exchange migrate` first"),
        ),
        (
            r"the database is at revision (?P<current>\S+), not (?P<head>\S+): run `exchange "
            r"migrate` first",
            N_("the database is at revision {current}, not {head}: run `exchange migrate` first"),
        ),
        (
            r"the database is at revision (?P<current>\S+), which this release of exchange does "
            r"not know: it was migrated by a newer release; run that release",
            N_(
                "the database is at revision {current}, which this release of exchange does not "
                "know: it was migrated by a newer release; run that release"
            ),
        ),
        (
            r"database (?P<url>\S+) is unreachable: (?P<why>.+)",
            N_("database {url} is unreachable: {why}"),
        ),
        (
            r"database (?P<url>\S+) is busy: (?P<why>.+) \(another connection held a write lock "
            r"longer than the busy timeout\)",
            N_(
                "database {url} is busy: {why} (another connection held a write lock longer than "
                "the busy timeout)"
            ),
        ),
        (
            r"database (?P<url>\S+) rolled a transaction back: (?P<why>.+)",
            N_("database {url} rolled a transaction back: {why}"),
        ),
        # exchange/cli/common.py: a read command pointed at a database that is not there
        (
            r"no database at (?P<where>.+?): set EXCHANGE_DATABASE_URL to .*",
            N_(
                "no database at {where}: set EXCHANGE_DATABASE_URL to the service's database (or "
                "run from its folder); a read command never creates one, `exchange migrate` "
                "creates a new empty one"
            ),
        ),
        # exchange/settings, exchange/app.py, exchange/secrets.py, exchange/report
        (r"configuration file not found: (?P<path>.+)", N_("configuration file not found: {path}")),
        (
            r"invalid configuration: (?P<name>\S+): cannot be read \(expected JSON for "
            r"tables/lists\)",
            N_("invalid configuration: {name}: cannot be read (expected JSON for tables/lists)"),
        ),
        (r"invalid configuration: (?P<parts>.+)", N_("invalid configuration: {parts}")),
        (r"configuration file (?P<path>.+?): (?P<why>.+)", N_("configuration file {path}: {why}")),
        (
            r"channel (?P<channel>[\w-]+): (?P<name>\w+) cannot be read: (?P<why>[^:]+)",
            N_("channel {channel}: {name} cannot be read: {why}"),
        ),
        (
            r"(?P<name>EXCHANGE_\w+) cannot be read: (?P<why>[^:]+)",
            N_("{name} cannot be read: {why}"),
        ),
        (
            r"EXCHANGE_SITE_URL is not set: the site to deliver to is required",
            N_("EXCHANGE_SITE_URL is not set: the site to deliver to is required"),
        ),
        (
            r"EXCHANGE_WOO_URL is not set: the WooCommerce shop is required",
            N_("EXCHANGE_WOO_URL is not set: the WooCommerce shop is required"),
        ),
        (
            r"EXCHANGE_WOO_KEY and EXCHANGE_WOO_SECRET \(or their _FILE twins\) are required",
            N_("EXCHANGE_WOO_KEY and EXCHANGE_WOO_SECRET (or their _FILE twins) are required"),
        ),
        (
            r"the bitrix target needs (?P<names>EXCHANGE_\w+( or EXCHANGE_\w+|, EXCHANGE_\w+)*)",
            N_("the bitrix target needs {names}"),
        ),
        (
            r"(?P<setting>EXCHANGE_\w+=\w+) needs the brokers extra \((?P<command>.+)\): "
            r"(?P<module>\S+) is missing",
            N_("{setting} needs the brokers extra ({command}): {module} is missing"),
        ),
        (
            r"(?P<names>EXCHANGE_HTTP_TLS_CERT/EXCHANGE_HTTP_TLS_KEY|EXCHANGE_1C_DIR) cannot be "
            r"used: (?P<why>.+)",
            N_("{names} cannot be used: {why}"),
        ),
        (
            r"cannot serve on (?P<address>\S+) \((?P<names>[^)]*)\): (?P<why>.+)",
            N_("cannot serve on {address} ({names}): {why}"),
        ),
        (
            r"cannot serve metrics on (?P<address>\S+): (?P<why>.+)",
            N_("cannot serve metrics on {address}: {why}"),
        ),
        (r"EXCHANGE_REPORT_DIR is not set", N_("EXCHANGE_REPORT_DIR is not set")),
        (
            r"EXCHANGE_REPORT_DIR (?P<path>.+) cannot be created: (?P<why>[^:]+)",
            N_("EXCHANGE_REPORT_DIR {path} cannot be created: {why}"),
        ),
        (
            r"EXCHANGE_REPORT_DIR (?P<path>.+) is not writable",
            N_("EXCHANGE_REPORT_DIR {path} is not writable"),
        ),
        # exchange/intake/sources: a broker's own refusals
        (
            r"EXCHANGE_RABBITMQ_QUEUE: RabbitMQ has no queue (?P<queue>.+)",
            N_("EXCHANGE_RABBITMQ_QUEUE: RabbitMQ has no queue {queue}"),
        ),
        (
            r"EXCHANGE_RABBITMQ_URL: RabbitMQ refused the user or password",
            N_("EXCHANGE_RABBITMQ_URL: RabbitMQ refused the user or password"),
        ),
        (
            r"EXCHANGE_REDIS_URL: Redis refused the password",
            N_("EXCHANGE_REDIS_URL: Redis refused the password"),
        ),
        (
            r"(?P<broker>RabbitMQ|Redis) cannot be reached: (?P<why>.+)",
            N_("{broker} cannot be reached: {why}"),
        ),
        # exchange/settings/channels.py: run, serve and demo deliver to one channel (issue 31)
        (
            r"this version delivers to one channel; EXCHANGE_CHANNELS configures (?P<n>\d+) "
            r"\((?P<names>.*)\): keep one",
            N_(
                "this version delivers to one channel; EXCHANGE_CHANNELS configures {n} "
                "({names}): keep one"
            ),
        ),
    )
)

# What an operating system answers (``strerror``), quoted in an error: Russian for the usual
# ones, any other as it is.
_OS_ERRORS: dict[str, str] = {
    "No such file or directory": N_("No such file or directory"),
    "Permission denied": N_("Permission denied"),
    "Is a directory": N_("Is a directory"),
    "Not a directory": N_("Not a directory"),
    "File exists": N_("File exists"),
    "No space left on device": N_("No space left on device"),
    "Read-only file system": N_("Read-only file system"),
    "Address already in use": N_("Address already in use"),
    "Cannot assign requested address": N_("Cannot assign requested address"),
    "Connection refused": N_("Connection refused"),
}


def event_said(event: str | None, detail: str | None, lang: Lang) -> str:
    """A history row's event in words. An uncharged attempt handed back (``released``) whose
    request went out with no answer (its detail begins ``result-unknown:``,
    ``queue.record``: a timeout after sending) was sent, not "returned unsent": said as sent,
    answer unknown, sent again (review mpadvice item 3), or, a Wildberries upload the next
    attempt waits to learn about instead (its words say so: ``_ANSWER_LOST``), as a wait
    (seller review 35); one the site or the marketplace
    answered with its pace refusal (a 429: ``domain.retry`` writes "… busy, not charged: …")
    was sent and answered, said so (review ozon, item 6); any other by ``name``."""
    if event == "released" and (detail or "").startswith("result-unknown: "):
        if _ANSWER_LOST.search(detail or ""):
            return name("event", "released-unknown-waits", lang)
        return name("event", "released-unknown", lang)
    if event == "released" and _ANSWERED_BUSY.match(detail or ""):
        if _MAY_HAVE_APPLIED.search(detail or ""):
            return name("event", "released-may-apply", lang)
        return name("event", "released-busy", lang)
    if event == "awaiting-outcome" and _ON_1C.search(detail or ""):
        return name("event", "awaiting-1c", lang)
    if event == "awaiting-outcome" and _ON_PERSON.match(detail or ""):
        return name("event", "awaiting-person", lang)
    return name("event", event, lang)


# ``items._waits_for_1c``'s words: the wait is on 1C's next package, not on the channel
_ON_1C = re.compile(r"; 1C may send the other price type in its next package: looked at again ")
# ``items._waits_for_person``'s words: the wait is on an operator's retry or cancel
_ON_PERSON = re.compile(r"waits for a person's decision on ")

# ``domain.retry``'s words of a release on the site's pace refusal: "<who> busy, not charged: "
_ANSWERED_BUSY = re.compile(r"[^:]*\bbusy, not charged: ")
# ``WildberriesTarget._may_apply``'s words: the upload may have been applied, the next attempt
# waits to learn whether it was
_MAY_HAVE_APPLIED = re.compile(r"\(upload\): it may have made a task all the same: ")
# ``WildberriesTarget._may_apply``'s words of an upload whose answer was lost: the next attempt
# waits to learn whether WB applied it, never sends it again
_ANSWER_LOST = re.compile(r"\(upload\): its answer was lost: the good waits until ")


def state_said(
    state: str | None,
    lang: Lang,
    *,
    awaiting: bool = False,
    on_1c: bool = False,
    on_person: bool = False,
) -> str:
    """A delivery's state in words: a delayed one that waits for its channel
    (``exchange.ops.waits.awaiting``: Ozon's hourly limit, an outcome read later, a read-back)
    as a wait, never as a retry; one whose wait is on 1C's other price type (``on_1c``) as a
    wait for 1C, one whose wait is on an operator's decision on the quarantined main price
    (``on_person``) as a wait for a person, never for the marketplace (``waits.wait_of``); any
    other by ``name``. The one rule ``find``, ``status`` and the workbench share."""
    if state == "delayed" and awaiting and on_1c:
        return name("state", "awaiting-1c", lang)
    if state == "delayed" and awaiting and on_person:
        return name("state", "awaiting-person", lang)
    if state == "delayed" and awaiting:
        return name("state", "awaiting", lang)
    return name("state", state, lang)


def channel_named(channel: str, target: str | None, lang: Lang) -> str:
    """A channel as an operator's words name it (contract 13): its name and what it is,
    «канал ozon (Ozon)», "channel shop (site)"; a target this version does not know by its
    code, none without the brackets."""
    if not target:
        return _("channel {channel}", lang).format(channel=channel)
    known = NAMES["target"].get(target)
    what = say(known, lang) if known is not None else target
    return _("channel {channel} ({what})", lang).format(channel=channel, what=what)


def channels_named(configured: bool, registered: int) -> bool:
    """Whether the operator's words name the channels (contract 13), the one rule the words,
    the workbench banner's buttons and the history share: with ``EXCHANGE_CHANNELS`` set
    (``configured``: the operator named the channels, and the cause codes name them too), or
    with more than one channel registered and not dropped (``registered``: "the site" and "every
    worker" would then be wrong, whatever this process's configuration). One channel of
    ``EXCHANGE_TARGET`` keeps the words it always had."""
    return configured or registered > 1


def channel_subject(
    channel: str | None, target: str | None, lang: Lang, *, named: bool
) -> str | None:
    """What the words say is busy, paused or failing where the one site's words say "the site"
    (contract 13, 14): the channel named («канал ozon (Ozon)», ``channel_named``) where
    ``named`` (``channels_named``) and the row is a channel's; else a marketplace by its own
    name («Ozon»: a marketplace is no site); None where "the site" is right (the one site, or a
    row of no channel)."""
    if named and channel is not None:
        return channel_named(channel, target, lang)
    if target is not None and on_marketplace(target):
        return say(NAMES["target"][target], lang)
    return None


def target_said(english: str, lang: Lang) -> str:
    """A target said by its English name (``NAMES["target"]``, as a stored detail says it) in
    ``lang``; a name this version does not know as it is."""
    for known in NAMES["target"].values():
        if say(known, "en") == english:
            return say(known, lang)
    return english


def subject_said(english: str, lang: Lang) -> str:
    """A channel as a stored detail names it (``channel_subject``'s English words, as a
    marketplace's items write them: "channel ozon (Ozon)", "Yandex Market") in ``lang``:
    «канал ozon (Ozon)», «Яндекс Маркет»; a marketplace's code (an older detail's "ozon",
    "yandex-market") by its name; anything else as it is."""
    found = re.fullmatch(r"channel (?P<c>[a-z0-9-]+) \((?P<what>[^()]+)\)", english)
    if found:
        return _("channel {channel} ({what})", lang).format(
            channel=found["c"], what=target_said(found["what"], lang)
        )
    if on_marketplace(english):
        return say(NAMES["target"][english], lang)
    return target_said(english, lang)


# review ozonpair: a new dependent price waits for a person's decision on the quarantined one
_WAITS_FOR_PERSON = N_(
    "waits for a person's decision on {m} version {v} of its SKU (price type {pt}, message_id "
    "{id}), quarantined by a rule of two price types: beside the {m} {a} held on {t&} it would "
    "show a pair 1C never stated; retrying {id} sends both together, cancelling it lets this "
    "price go beside {m} {a}; looked at again in {w} s, not charged"
)
# A channel as a marketplace's items name it in a detail (``items.Channel.said``): named
# («channel ozon (Ozon)»), the marketplace alone, or a target's code (details written before).
_SUBJECT = r"channel [a-z0-9-]+ \([^()]+\)|Yandex Market|[\w-]+"

_UNITS = {"en": ("d", "h", "min", "s"), "ru": ("д", "ч", "мин", "с")}


def human_age(seconds: float | None, lang: str = "en") -> str:
    """An age or a wait as a person reads it: the two largest units ("3 h 12 min", «3 ч 12
    мин» with ``lang`` ``ru``), "-" for none. The one formatting of a duration that
    ``status``, ``find`` and the workbench share (a detail's wait too: ``error_words``)."""
    if seconds is None:
        return "-"
    whole = max(0, int(seconds))
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    d, h, m, s = _UNITS["ru" if lang == "ru" else "en"]
    parts = [(days, d), (hours, h), (minutes, m), (secs, s)]
    while len(parts) > 1 and parts[0][0] == 0:
        parts.pop(0)
    return " ".join(f"{value} {unit}" for value, unit in parts[:2] if value or unit == s)


# The groups of ``_ERRORS`` that hold a wait in seconds, said «{w} с» in a message: a wait of a
# minute or more is said in minutes and hours (``human_age``), never «уйдёт через 2778 с»
# (review mpadvice item 4: Ozon's hourly limit).
_WAITS = ("w", "l")
_LONG_WAIT_S = 60


def _waits_said(message: str, values: Mapping[str, str | None], lang: Lang) -> str:
    """``message`` (translated) with each long wait of ``values`` put in its place as
    ``human_age`` says it, its unit with it; a short one (or no number) as it was."""
    for group in _WAITS:
        value = values.get(group) or ""
        if not re.fullmatch(r"\d+(\.\d+)?", value) or float(value) < _LONG_WAIT_S:
            continue
        unit = _UNITS["ru" if lang == "ru" else "en"][3]
        said = re.sub(rf"\{{{group}\}}\s+{unit}\b", human_age(float(value), lang), message)
        if said != message:
            message = said
    return message


def error_words(text: str, lang: Lang) -> str:
    """An error of the service, a detail of a message's history or the outcome of a 1C
    exchange, in the page's language."""
    if lang == "en":
        return text
    for pattern, message in _ERRORS:
        found = pattern.fullmatch(text)
        if found:
            values = {key: value or "" for key, value in found.groupdict().items()}
            if "count" in values:
                values["count"] = messages_counted(int(values["count"]), lang)
            if "state" in values:
                values["state"] = name("state", values["state"], lang)
            if "states" in values:  # "m-1 is cancelled, m-2 is delivered": each state named
                values["states"] = re.sub(
                    r"(\S+) is ([\w-]+)",
                    lambda said: f"{said[1]} — {name('state', said[2], lang)}",
                    values["states"],
                )
            if "why" in values:
                values["why"] = os_error_words(values["why"], lang)
            if "parts" in values:
                values["parts"] = settings_words(values["parts"], lang)
            if "source" in values:
                values["source"] = channels_source_words(values["source"], lang)
            return _waits_said(_(message, lang), values, lang).format(**values)
    said = detail_words(text)
    return said if said != text else onec_words(text)  # a 1C exchange's outcome (its page)


# A history's words that name a command of the command line, and what a page names instead:
# the button on the message's page that does it (seller 34 item 5).
_ON_A_PAGE: tuple[tuple[str, str], ...] = (
    (
        "release it with `exchange withheld release`, or in the cabinet",
        "release it with the «Release to buyers» button, or in the cabinet",
    ),
)


def page_words(text: str, lang: Lang) -> str:
    """``error_words`` as the workbench's pages say it: a command the detail names (Yandex
    Market's «выпустите её командой `exchange withheld release`») said as the page's button
    («кнопкой «Выпустить к покупателям»»); the command line keeps the command."""
    for command, button in _ON_A_PAGE:
        text = text.replace(command, button)
    return error_words(text, lang)


def channels_source_words(source: str, lang: Lang) -> str:
    """Where the channels were written (``Settings.channels_source``) in ``lang``: a
    variable's name as it is, the TOML file's tables with its path."""
    if source.startswith(CHANNEL_TABLES_OF):
        path = source.removeprefix(CHANNEL_TABLES_OF)
        return _("the [channels.NAME] tables of {path}", lang).format(path=path)
    return source


def os_error_words(text: str, lang: Lang) -> str:
    """An operating system's answer (``No such file or directory``) in ``lang``; one this
    table does not know as it is."""
    known = _OS_ERRORS.get(text.strip())
    return _(known, lang) if known is not None else text


# The settings' problems (pydantic's own messages and the validators' of exchange/settings) in
# Russian; the variable's name stays as it is. One no pattern knows is shown as it is.
_SETTINGS_PROBLEMS: tuple[tuple[re.Pattern[str], str | tuple[str, str]], ...] = tuple(
    (re.compile(pattern, re.DOTALL), message)
    for pattern, message in (
        (r"Field required", NP_("a setting", "Field required")),
        # a channel's own problems (exchange/settings/channels.py)
        (
            r"a channel's name is 1-32 characters of a-z, 0-9 and -",
            N_("a channel's name is 1-32 characters of a-z, 0-9 and -"),
        ),
        (
            r"a one-target setting, refused beside EXCHANGE_CHANNELS: write it in the channel "
            r"it belongs to, without EXCHANGE_ in lower case \(e\.g\. site_url\)",
            N_(
                "a one-target setting, refused beside EXCHANGE_CHANNELS: write it in the channel "
                "it belongs to, without EXCHANGE_ in lower case (e.g. site_url)"
            ),
        ),
        (
            r"EXCHANGE_CHANNELS names no channel: name at least one, or unset it for the one "
            r"target of EXCHANGE_TARGET",
            N_(
                "EXCHANGE_CHANNELS names no channel: name at least one, or unset it for the one "
                "target of EXCHANGE_TARGET"
            ),
        ),
        (
            r'takes: a list of kinds, e\.g\. \["price"\]',
            N_('takes: a list of kinds, e.g. ["price"]'),
        ),
        (
            r"takes: (?P<kinds>.+) is not a kind of EXCHANGE_KINDS \((?P<known>.+)\)",
            N_("takes: {kinds} is not a kind of EXCHANGE_KINDS ({known})"),
        ),
        (
            r"takes: the (?P<target>\S+) target takes none of the kinds of EXCHANGE_KINDS "
            r"\((?P<known>.+)\)",
            N_("takes: the {target} target takes none of the kinds of EXCHANGE_KINDS ({known})"),
        ),
        (
            r"takes: the (?P<target>\S+) target takes price messages only, not (?P<kinds>.+)",
            N_("takes: the {target} target takes price messages only, not {kinds}"),
        ),
        (
            r"(?P<key>\w+) is not a setting of an? (?P<target>[\w-]+) channel; it takes "
            r"(?P<keys>.+)",
            N_("{key} is not a setting of a {target} channel; it takes {keys}"),
        ),
        (
            r"(?P<key>\w+): a secret is written in a channel only as a file: set (?P<file>\w+) "
            r"to the file that holds it",
            N_(
                "{key}: a secret is written in a channel only as a file: set {file} to the file "
                "that holds it"
            ),
        ),
        (
            r"(?P<keys>[\w, ]+): required by the (?P<target>[\w-]+) target",
            N_("{keys}: required by the {target} target"),
        ),
        (
            r"target is required: one of (?P<targets>.+)",
            N_("target is required: one of {targets}"),
        ),
        (
            r"target is (?P<said>'[^']*'): one of (?P<targets>.+)",
            N_("target is {said}: one of {targets}"),
        ),
        (r"Extra inputs are not permitted", N_("Extra inputs are not permitted")),
        (
            r"Input should be a valid integer(, .*)?",
            N_("Input should be a valid integer"),
        ),
        (r"Input should be a valid number(, .*)?", N_("Input should be a valid number")),
        (r"Input should be a valid boolean(, .*)?", N_("Input should be a valid boolean")),
        (
            r"Input should be a valid (dictionary|list|string)(, .*)?",
            N_("Input has the wrong type"),
        ),
        (
            r"Input should be greater than or equal to (?P<n>\S+)",
            N_("Input should be greater than or equal to {n}"),
        ),
        (r"Input should be greater than (?P<n>\S+)", N_("Input should be greater than {n}")),
        (
            r"Input should be less than or equal to (?P<n>\S+)",
            N_("Input should be less than or equal to {n}"),
        ),
        (r"Input should be less than (?P<n>\S+)", N_("Input should be less than {n}")),
        (
            r"String should have at most (?P<n>\d+) characters?",
            N_("String should have at most {n} characters"),
        ),
        (
            r"String should have at least (?P<n>\d+) characters?",
            N_("String should have at least {n} characters"),
        ),
        (r"Input should be (?P<choices>'.+')", N_("Input should be {choices}")),
        # pydantic's other common types (decimal_parsing, string_pattern_mismatch, …)
        (r"Input should be a valid decimal", N_("Input should be a valid decimal")),
        (
            r"Decimal input should be an integer, float, string or Decimal object",
            N_("Input should be a valid decimal"),
        ),
        (
            r"Decimal input should have no more than (?P<n>\d+) decimal places?",
            N_("Decimal input should have no more than {n} decimal places"),
        ),
        (r"Input should be a finite number", N_("Input should be a finite number")),
        (r"Input should be a multiple of (?P<n>\S+)", N_("Input should be a multiple of {n}")),
        (
            r"String should match pattern (?P<pattern>'.*')",
            N_("String should match pattern {pattern}"),
        ),
        (r"Input is not a valid path", N_("Input is not a valid path")),
        (r"Input should be a valid URL, (?P<why>.+)", N_("Input should be a valid URL ({why})")),
        (r"Invalid JSON: (?P<why>.+)", N_("Invalid JSON: {why}")),
        (
            r"(List|Dictionary) should have at least (?P<n>\d+) items? after validation, not "
            r"\d+",
            N_("should have at least {n} items"),
        ),
        (
            r"(List|Dictionary) should have at most (?P<n>\d+) items? after validation, not "
            r"\d+",
            N_("should have at most {n} items"),
        ),
        (
            r"must be the seller's Client-Id: a whole number above 0",
            N_("must be the seller's Client-Id: a whole number above 0"),
        ),
        (
            r"(?P<name>\S+) is shorter than (?P<n>\d+) characters: choose a longer one",
            N_("{name} is shorter than {n} characters: choose a longer one"),
        ),
        (
            r"unknown time zone (?P<zone>.+): an IANA name such as UTC or Europe/Moscow",
            N_("unknown time zone {zone}: an IANA name such as UTC or Europe/Moscow"),
        ),
        (r"must be DEBUG, INFO, WARNING or ERROR", N_("must be DEBUG, INFO, WARNING or ERROR")),
        (
            r"EXCHANGE_RETRY_BASE_DELAY must not exceed EXCHANGE_RETRY_MAX_DELAY",
            N_("EXCHANGE_RETRY_BASE_DELAY must not exceed EXCHANGE_RETRY_MAX_DELAY"),
        ),
        (
            r"must be a finite number of (?P<unit>\w+) greater than 0 and at most (?P<most>\S+); "
            r"for \(practically\) never, write (?P<never>\S+)",
            N_(
                "must be a finite number of {unit} greater than 0 and at most {most}; for "
                "(practically) never, write {never}"
            ),
        ),
        (r"must be a number of (?P<unit>\w+), not NaN", N_("must be a number of {unit}, not NaN")),
        (r"must start with http:// or https://", N_("must start with http:// or https://")),
        (
            r"must not hold spaces or control characters",
            N_("must not hold spaces or control characters"),
        ),
        (
            r"is not a URL \(e\.g\. https://shop\.example\.com\)",
            N_("is not a URL (e.g. https://shop.example.com)"),
        ),
        (
            r"has no host name \(e\.g\. https://shop\.example\.com\)",
            N_("has no host name (e.g. https://shop.example.com)"),
        ),
        (
            r"must be the site's base URL, without \?query or #fragment",
            N_("must be the site's base URL, without ?query or #fragment"),
        ),
        (
            r"EXCHANGE_SITE_URL: plain http:// to (?P<host>.+) would send the token unencrypted; "
            r"use https://, or set EXCHANGE_SITE_ALLOW_HTTP=true \(http:// is accepted without "
            r"it only for 127\.0\.0\.0/8, ::1 and localhost\)",
            N_(
                "EXCHANGE_SITE_URL: plain http:// to {host} would send the token unencrypted; use "
                "https://, or set EXCHANGE_SITE_ALLOW_HTTP=true (http:// is accepted without it "
                "only for 127.0.0.0/8, ::1 and localhost)"
            ),
        ),
        (
            r"not a database URL \(e\.g\. sqlite:///exchange\.db\)",
            N_("not a database URL (e.g. sqlite:///exchange.db)"),
        ),
        (
            r"unsupported database (?P<name>.+): use sqlite or postgresql",
            N_("unsupported database {name}: use sqlite or postgresql"),
        ),
        (
            r"kind (?P<kind>.+) is financial and can never be coalesced: use policy 'strict'",
            N_("kind {kind} is financial and can never be coalesced: use policy 'strict'"),
        ),
        (
            r"EXCHANGE_KINDS: the (?P<target>\S+) target takes price messages only, not "
            r"(?P<kinds>.+)",
            N_("EXCHANGE_KINDS: the {target} target takes price messages only, not {kinds}"),
        ),
        (
            r"(?P<setting>EXCHANGE_\w+=\w+) needs (?P<names>EXCHANGE_\w+(, EXCHANGE_\w+)*)",
            N_("{setting} needs {names}"),
        ),
        (r"must not be empty", N_("must not be empty")),
    )
)


def settings_words(text: str, lang: Lang) -> str:
    """The settings' problems ("EXCHANGE_MAX_ATTEMPTS: Input should be …; …", from
    ``settings.load.describe_validation_error``) in ``lang``, one by one; each variable's name
    as it is. A channel's own ("EXCHANGE_CHANNELS: channel shop: http_timeout: Input should be
    greater than 0; batch_size: …", ``settings.channels``) each by its key in the channel."""
    if lang == "en":
        return text
    said = []
    for part in re.split(r"; (?=EXCHANGE_\w+)", text):
        found = re.fullmatch(
            r"(?P<name>EXCHANGE_\w+(?:, EXCHANGE_\w+)*(?: \([^)]*\))?): (?P<problem>.+)",
            part,
            re.DOTALL,
        )
        named, problem = (found["name"] + ": ", found["problem"]) if found else ("", part)
        channel = re.fullmatch(r"channel (?P<name>[^:]+): (?P<problem>.+)", problem, re.DOTALL)
        if channel:  # EXCHANGE_CHANNELS: channel site: … (exchange/settings/channels.py)
            named += _("channel {name}: {what}", lang).format(name=channel["name"], what="")
            problem = _channel_problems(channel["problem"], lang)
        else:
            problem = _problem_words(problem, lang)
        said.append(named + problem)
    return "; ".join(said)


def _channel_problems(text: str, lang: Lang) -> str:
    """A channel's problems ("http_timeout: Input should be greater than 0; batch_size: …"),
    each in ``lang`` by its key in the channel, as it is (``settings.channels._described``)."""
    said = []
    for part in re.split(r"; (?=[a-z_]\w*(?: \([^)]*\))?: )", text):
        whole = _problem_words(part, lang)
        keyed = re.fullmatch(r"(?P<key>[a-z_]\w*(?: \([^)]*\))?): (?P<problem>.+)", part, re.DOTALL)
        if whole == part and keyed is not None:  # no pattern knows it whole: its key, then it
            whole = f"{keyed['key']}: {_problem_words(keyed['problem'], lang)}"
        said.append(whole)
    return "; ".join(said)


def _problem_words(problem: str, lang: Lang) -> str:
    """One setting's problem (pydantic's own words or a validator's of exchange/settings) in
    ``lang`` by ``_SETTINGS_PROBLEMS``; one no pattern knows as it is."""
    for pattern, message in _SETTINGS_PROBLEMS:
        matched = pattern.fullmatch(problem)
        if matched:
            values = {key: value or "" for key, value in matched.groupdict().items()}
            if "choices" in values:  # "'api', 'bitrix' or 'woocommerce'"
                values["choices"] = values["choices"].replace(
                    "' or '", pgettext("a list of choices", "' or '", lang)
                )
            return say(message, lang).format(**values)
    return problem


def inside_words(text: str, lang: Lang) -> str:
    """A text of the service quoted inside a sentence of a page (the dashboard's «последний
    обмен с 1С завершился ошибкой (…)»): in the page's language, without a sentence's full
    stop and capital letter."""
    said = error_words(text, lang).rstrip(".")
    return said[:1].lower() + said[1:] if said[1:2].islower() else said


# The details a message's history records (English, as `exchange history` prints them), as
# the message page says them in Russian. What a shop or a site answered (after "HTTP 422: "),
# ids, names, settings and times are kept as they are; a text that matches nothing is shown as
# it is. A detail that wraps another (``… (attempt 2 of 5)``) says the inner one in Russian too.
# Each pattern stands beside its English message (N_), as in every table below; the Russian is
# in the catalog (exchange/locale/ru/LC_MESSAGES/exchange.po, docs/translations.md).
_DETAILS: tuple[tuple[str, str], ...] = (
    # Yandex Market's read-back of an accepted update whose send without the discountBase 1C
    # replaced was refused (targets/yandex_market ``_clearing_refused``): first, so that the
    # read-back's own words (``shows {f}``) do not take the rest in.
    (
        r"(?P<s>.+); Yandex Market refused the update of offer (?P<o>'.*?') without "
        r"(?P<r>.+?), the strikethrough price 1C replaced \((?P<w>.+)\): buyers see it until "
        r"1C's next price of this SKU goes without it",
        N_(
            "{s*}; Yandex Market refused the update of offer {o} without {r}, the "
            "strikethrough price 1C replaced ({w*}): buyers see it until 1C's next price of "
            "this SKU goes without it"
        ),
    ),
    # A release Yandex Market refused as a whole (targets/yandex_market ``release_withheld``):
    # its answer said inside the marketplace's name (review 33: English under EXCHANGE_LANG=ru)
    (r"Yandex Market: (?P<d>.+)", N_("Yandex Market: {d*}")),
    (r"from staging row #(?P<n>\d+)", N_("from staging row #{n}")),
    (
        r"staging row #(?P<n>\d+) carried this message again: recorded, not sent again",
        N_("staging row #{n} carried this message again: recorded, not sent again"),
    ),
    (r"superseded by (?P<id>\S+)", N_("superseded by {id}")),
    (
        r"withheld, and a newer version was delivered: superseded by (?P<id>.+)",
        N_("withheld, and a newer version was delivered: superseded by {id}"),
    ),
    # A newer version withheld in its place (queue/withheld.py ``supersede_withheld``: a
    # marketplace's quarantine holds one price an offer)
    (
        r"withheld, and the channel withholds a newer version instead: superseded by (?P<id>.+)",
        N_("withheld, and the channel withholds a newer version instead: superseded by {id}"),
    ),
    (
        r"withheld, then released to buyers at a person's ask, and a newer version was "
        r"delivered: superseded by (?P<id>.+)",
        N_(
            "withheld, then released to buyers at a person's ask, and a newer version was "
            "delivered: superseded by {id}"
        ),
    ),
    (
        r"withheld, then released to buyers at a person's ask, and the channel withholds a "
        r"newer version instead: superseded by (?P<id>.+)",
        N_(
            "withheld, then released to buyers at a person's ask, and the channel withholds a "
            "newer version instead: superseded by {id}"
        ),
    ),
    (
        r"HTTP (?P<s>\d+): the site took the price and withholds it from buyers",
        N_("HTTP {s}: the site took the price and withholds it from buyers"),
    ),
    (
        r"HTTP (?P<s>\d+): the site shows it to buyers",
        N_("HTTP {s}: the site shows it to buyers"),
    ),
    (
        r"the channel shows this version to buyers",
        N_("the channel shows this version to buyers"),
    ),
    (
        r"released by a person: the channel shows this version to buyers",
        N_("released by a person: the channel shows this version to buyers"),
    ),
    (
        r"the channel no longer withholds this version and shows buyers another price \(set "
        r"where the channel is managed, e\.g\. the seller's cabinet\): it never reached "
        r"buyers; superseded on the channel\. Send a new price from 1C if the channel's is "
        r"wrong",
        N_(
            "the channel no longer withholds this version and shows buyers another price (set "
            "where the channel is managed, e.g. the seller's cabinet): it never reached buyers; "
            "superseded on the channel. Send a new price from 1C if the channel's is wrong"
        ),
    ),
    (
        r"the channel's price quarantine now holds another price for the good in this "
        r"version's place \(a newer upload replaced it there\): it will never reach buyers; "
        r"superseded on the channel",
        N_(
            "the channel's price quarantine now holds another price for the good in this "
            "version's place (a newer upload replaced it there): it will never reach buyers; "
            "superseded on the channel"
        ),
    ),
    (r"the site did not answer: (?P<d>.+)", N_("the site did not answer: {d*}")),
    # a worker's note of a key that reads but may not write (``domain.pause.READ_ONLY_NOTE``):
    # the channels table's pause says it
    (
        r"the key may read but not write \((?P<d>.+)\)",
        N_("the key may read but not write ({d*})"),
    ),
    (r"not released by the channel: (?P<d>.+)", N_("not released by the channel: {d*}")),
    (
        r"this channel has no way to release a withheld price: confirm it where the channel is "
        r"managed, or send a new price",
        N_(
            "this channel has no way to release a withheld price: confirm it where the channel "
            "is managed, or send a new price"
        ),
    ),
    (
        r"version (?P<v>\d+) is at or below version (?P<d>\d+), already delivered: never sent",
        N_("version {v} is at or below version {d}, already delivered: never sent"),
    ),
    # the same of a delivery in flight when its lease ran out (review rev39 W1)
    (
        r"version (?P<v>\d+) is at or below version (?P<d>\d+), already delivered: not sent "
        r"again \(the send in flight when its lease ran out may have reached the channel\)",
        N_(
            "version {v} is at or below version {d}, already delivered: not sent again (the "
            "send in flight when its lease ran out may have reached the channel)"
        ),
    ),
    # a strictly ordered document's version below where a newer channel's order starts
    # (``queue.coalesce``; seller 34 item 6: docs/channels.ru.md quoted it in English)
    (
        r"version (?P<v>\d+) is below version (?P<f>\d+), where strict order on this channel "
        r"starts: never sent",
        N_(
            "version {v} is below version {f}, where strict order on this channel starts: "
            "never sent"
        ),
    ),
    (
        r"version (?P<v>\d+) never arrived within (?P<t>\S+) s",
        N_("version {v} never arrived within {t} s"),
    ),
    (
        r"versions (?P<r>\S+) never arrived within (?P<t>\S+) s",
        N_("versions {r} never arrived within {t} s"),
    ),
    (r"(?P<d>.+) \(attempt (?P<a>\d+) of (?P<m>\d+)\)", N_("{d*} (attempt {a} of {m})")),
    (r"result-unknown: (?P<d>.+)", N_("result-unknown: {d*}")),
    (r"site busy, not charged: (?P<d>.+)", N_("site busy, not charged: {d*}")),
    (r"marketplace busy, not charged: (?P<d>.+)", N_("marketplace busy, not charged: {d*}")),
    # A channel's 429 names it (``channel_subject``, as the worker's words say it in English):
    # a named channel by its name and what it is, a marketplace of its own by its name.
    (
        r"channel (?P<c>[a-z0-9-]+) \((?P<what>[^()]+)\) busy, not charged: (?P<d>.+)",
        N_("channel {c} ({what^}) busy, not charged: {d*}"),
    ),
    (
        r"(?P<what>Ozon|Wildberries|Yandex Market) busy, not charged: (?P<d>.+)",
        N_("{what^} busy, not charged: {d*}"),
    ),
    (r"no answer, not charged: (?P<d>.+)", N_("no answer, not charged: {d*}")),
    (r"probe failed, not charged: (?P<d>.+)", N_("probe failed, not charged: {d*}")),
    (
        r"not sent: delivery paused \((?P<why>.+)\)",
        N_("not sent: delivery paused ({why*})"),
    ),
    (r"confirmed by RabbitMQ", N_("confirmed by RabbitMQ")),
    (r"import: success(?P<t>.*)", N_("import: success{t}")),
    (
        r"read back after (?P<e>\w+): (?P<f>\w+)=(?P<v>\S+)",
        N_("read back after {e}: {f}={v}"),
    ),
    (
        r"(?P<d>.+); read back: the shop does not hold it, sent again",
        N_("{d}; read back: the shop does not hold it, sent again"),
    ),
    (
        r"price type (?P<t>'[^']*') is mapped to null by (?P<s>\w+): left out of this shop on "
        r"purpose",
        N_("price type {t} is mapped to null by {s}: left out of this shop on purpose"),
    ),
    (
        r"price type (?P<t>'[^']*') is not mapped by (?P<s>\w+)",
        N_("price type {t} is not mapped by {s}"),
    ),
    (
        r"the shop has no product or variation with SKU (?P<s>.+)",
        N_("the shop has no product or variation with SKU {s}"),
    ),
    (
        r"RabbitMQ returned the message as unroutable \((?P<c>[^)]*)\): no queue is bound to the "
        r"exchange (?P<x>\S+) for the routing key (?P<k>.+)",
        N_(
            "RabbitMQ returned the message as unroutable ({c}]*)): no queue is bound to the "
            "exchange {x} for the routing key {k}"
        ),
    ),
    (r"retried by (?P<o>.+) \(was (?P<r>[^)]*)\)", N_("retried by {o} (was {r}]*))")),
    (r"cancelled by (?P<o>.+) \(was (?P<r>[^)]*)\)", N_("cancelled by {o} (was {r}]*))")),
    (r"put before the backlog by (?P<o>.+)", N_("put before the backlog by {o}")),
    (
        r"the lease of (?P<w>\S+) had expired: result unknown; taken over by (?P<n>\S+) for "
        r"attempt (?P<a>\d+)",
        N_("the lease of {w} had expired: result unknown; taken over by {n} for attempt {a}"),
    ),
    (
        r"the lease of (?P<w>\S+) expired during attempt (?P<a>\d+) of (?P<m>\d+); the result of "
        r"that attempt is unknown",
        N_(
            "the lease of {w} expired during attempt {a} of {m}; the result of that attempt is "
            "unknown"
        ),
    ),
    (r"no outcome yet; leased until (?P<t>.+)", N_("no outcome yet; leased until {t}")),
    # why an aggregate is held (exchange/ops/status.py, ``blocked``)
    (
        r"(?P<id>\S+) is quarantined \((?P<r>[^)]*)\): retry or cancel it",
        N_("{id} is quarantined ({r}]*)): retry or cancel it"),
    ),
    (
        r"(?P<id>\S+) is quarantined \((?P<r>[^)]*)\) after a gap at version (?P<v>\d+)",
        N_("{id} is quarantined ({r}]*)) after a gap at version {v}"),
    ),
    (
        r"waiting for version (?P<v>\d+) \(a gap\); (?P<id>\S+) is next",
        N_("waiting for version {v} (a gap); {id} is next"),
    ),
    (
        r"waiting for version (?P<v>\d+), kept on no channel; (?P<id>\S+) is next: "
        r"exchange channels seed (?P<name>\S+) --from (?P<first>\S+)",
        N_(
            "waiting for version {v}, kept on no channel; {id} is next: exchange channels "
            "seed {name} --from {first}"
        ),
    ),
    # the site's refusals that pause delivery (exchange/targets/shop_api/answers.py)
    (r"HTTP (?P<s>\d+): the site refused the token", N_("HTTP {s}: the site refused the token")),
    # Wildberries' (exchange/targets/wildberries): WB's own words kept as they are
    (
        r"the Wildberries token is read-only: its claims say so",
        N_("the Wildberries token is read-only: its claims say so"),
    ),
    (
        r"the Wildberries token has no «Цены и скидки» \(Prices and discounts\) category: "
        r"its claims say so",
        N_(
            "the Wildberries token has no «Цены и скидки» (Prices and discounts) category: "
            "its claims say so"
        ),
    ),
    (
        r"HTTP 401 (?P<w>.*): the Wildberries token is read-only",
        N_("HTTP 401 {w}: the Wildberries token is read-only"),
    ),
    (
        r"HTTP 401 (?P<w>.*): Wildberries refused the token",
        N_("HTTP 401 {w}: Wildberries refused the token"),
    ),
    # Wildberries' details (exchange/targets/wildberries: target.py, answers.py); WB's own
    # words ({w}), ids, prices and vendor codes kept as they are. A {x*} is a part said apart.
    (
        r"the service's database could not keep the Wildberries tasks \((?P<e>\w+)\): tried "
        r"again",
        N_("the service's database could not keep the Wildberries tasks ({e}): tried again"),
    ),
    (
        r"SKUs (?P<a>.+?) and (?P<b>.+?) share the article \(Артикул\) (?P<c>.+), one "
        r"Wildberries good \(one nmID, one price\): SKU (?P=a) was sent to it first, and (?P=b) "
        r"would overwrite its price; give each SKU its own article in 1C",
        N_(
            "SKUs {a} and {b} share the article (Артикул) {c}, one Wildberries good (one nmID, "
            "one price): SKU {a} was sent to it first, and {b} would overwrite its price; give "
            "each SKU its own article in 1C"
        ),
    ),
    # the marketplaces' one SKU an offer (exchange/targets/marketplace/holders.py)
    (
        r"SKUs (?P<a>.+?) and (?P<b>.+?) share the article \(Артикул\) (?P<c>.+), one "
        r"(?P<m>Ozon|Wildberries|Yandex Market) offer \(one price\): SKU (?P=a) was sent to it "
        r"first, and (?P=b) would overwrite its price; give each SKU its own article in 1C",
        N_(
            "SKUs {a} and {b} share the article (Артикул) {c}, one {m} offer (one price): SKU "
            "{a} was sent to it first, and {b} would overwrite its price; give each SKU its own "
            "article in 1C"
        ),
    ),
    (
        r"Wildberries cancelled task (?P<t>\d+) \(status 4\): uploaded again",
        N_("Wildberries cancelled task {t} (status 4): uploaded again"),
    ),
    (
        r"Wildberries: task (?P<t>\d+) updated nmID (?P<n>\d+), which Wildberries names vendor "
        r"code (?P<v>'.*') now, not (?P<s>'.*'): the vendor code map was stale and is read "
        r"again; Wildberries' catalogue has no good with vendor code (?P<c>'.*') now",
        N_(
            "Wildberries: task {t} updated nmID {n}, which Wildberries names vendor code {v} "
            "now, not {s}: the vendor code map was stale and is read again; Wildberries' "
            "catalogue has no good with vendor code {c} now"
        ),
    ),
    (
        r"Wildberries: task (?P<t>\d+) updated nmID (?P<n>\d+), which Wildberries names vendor "
        r"code (?P<v>'.*') now, not (?P<s>'.*'): the vendor code map was stale and is read "
        r"again",
        N_(
            "Wildberries: task {t} updated nmID {n}, which Wildberries names vendor code {v} "
            "now, not {s}: the vendor code map was stale and is read again"
        ),
    ),
    (
        r"Wildberries: task (?P<t>\d+) updated nmID (?P<n>\d+)",
        N_("Wildberries: task {t} updated nmID {n}"),
    ),
    (
        r"Wildberries may still apply (?P<which>.+) \(nmID (?P<n>\d+)\); its catalogue "
        r"(?P<shows>does not list it|holds \d+): the good waits until it shows (?P<p>\S+), at "
        r"most until (?P<u>.+) UTC",
        N_(
            "Wildberries may still apply {which*} (nmID {n}); its catalogue {shows*}: the good "
            "waits until it shows {p}, at most until {u} UTC"
        ),
    ),
    # A marketplace's send whose answer was lost may still land (marketplace/late.py): the
    # good's next send waits until the marketplace shows it, or the bound passes.
    (
        r"(?P<m>Ozon|Wildberries|Yandex Market) may still apply the send of (?P<p>.+?) at "
        r"(?P<at>\S+ \S+) UTC whose answer was lost; (?P<f>.+): the good waits until "
        r"(?P=m) shows it, at most until (?P<u>\S+ \S+) UTC, not charged",
        N_(
            "{m} may still apply the send of {p} at {at} UTC whose answer was lost; {f*}: the "
            "good waits until {m} shows it, at most until {u} UTC, not charged"
        ),
    ),
    (
        r"(?P<m>Ozon|Wildberries|Yandex Market) shows (?P<p>.+?), the prices of the send at "
        r"(?P<at>\S+ \S+) UTC whose answer was lost; that send may still apply after a newer "
        r"one: the good waits until (?P<u>\S+ \S+) UTC, not charged",
        N_(
            "{m} shows {p}, the prices of the send at {at} UTC whose answer was lost; that "
            "send may still apply after a newer one: the good waits until {u} UTC, not charged"
        ),
    ),
    (
        r"(?P<m>Ozon|Wildberries|Yandex Market) shows (?P<p>.+?): the send whose answer was "
        r"lost has landed; not sent again",
        N_("{m} shows {p}: the send whose answer was lost has landed; not sent again"),
    ),
    # A product the marketplace holds no price of yet (Ozon's "0" of a product never priced:
    # ozon.target._money), never "shows price 0" (review words34).
    (
        r"(?P<m>Ozon|Wildberries|Yandex Market) shows no price yet",
        N_("{m} shows no price yet"),
    ),
    (
        r"(?P<m>Ozon|Wildberries|Yandex Market) shows (?P<p>[\w.]+ (?:none|[\d.]+)"
        r"(?:, [\w.]+ (?:none|[\d.]+))*)",
        N_("{m} shows {p}"),
    ),
    (
        r"Ozon does not list offer_id (?P<o>'.*')",
        N_("Ozon does not list offer_id {o}"),
    ),
    (
        r"its prices could not be read \((?P<d>.+)\)",
        N_("its prices could not be read ({d*})"),
    ),
    (
        r"the upload of (?P<p>\S+) whose answer was lost",
        N_("the upload of {p} whose answer was lost"),
    ),
    (
        r"the upload of (?P<p>\S+) Wildberries answered HTTP (?P<s>\d+) \(it may have made a "
        r"task all the same\)",
        N_(
            "the upload of {p} Wildberries answered HTTP {s} (it may have made a task all the same)"
        ),
    ),
    (
        r"task (?P<t>\d+) of (?P<p>\S+), not shown for (?P<s>\S+) s,",
        N_("task {t} of {p}, not shown for {s} s,"),
    ),
    (r"does not list it", N_("does not list it")),
    (r"holds (?P<h>\d+)", N_("holds {h}")),
    (
        r"Wildberries' catalogue holds (?P<h>\d+) for nmID (?P<n>\d+): (?P<which>.+) has landed, "
        r"the price is in force",
        N_(
            "Wildberries' catalogue holds {h} for nmID {n}: {which*} has landed, the price is in "
            "force"
        ),
    ),
    (
        r"Wildberries' price quarantine lists (?P<p>\S+) for nmID (?P<n>\d+): (?P<which>.+) has "
        r"landed there\. Wildberries sells at the old price until the seller confirms the new "
        r"one in the seller's cabinet \(Цены и скидки → Карантин цен\) or a newer price is sent",
        N_(
            "Wildberries' price quarantine lists {p} for nmID {n}: {which*} has landed there. "
            "Wildberries sells at the old price until the seller confirms the new one in the "
            "seller's cabinet (Цены и скидки → Карантин цен) or a newer price is sent"
        ),
    ),
    (
        r"Wildberries' price quarantine listed (?P<p>\S+) for nmID (?P<n>\d+): (?P<which>.+) had "
        r"landed there, withheld \(WB's cabinet may show it waiting for the seller's "
        r"confirmation: do not confirm it\); a newer version goes in its place: superseded by "
        r"(?P<id>.+)",
        N_(
            "Wildberries' price quarantine listed {p} for nmID {n}: {which*} had landed there, "
            "withheld (WB's cabinet may show it waiting for the seller's confirmation: do not "
            "confirm it); a newer version goes in its place: superseded by {id}"
        ),
    ),
    (
        r"Wildberries' catalogue showed (?P<h>\d+) for nmID (?P<n>\d+): (?P<which>.+) had "
        r"landed, buyers saw it; then a newer version went: superseded by (?P<id>.+)",
        N_(
            "Wildberries' catalogue showed {h} for nmID {n}: {which*} had landed, buyers saw "
            "it; then a newer version went: superseded by {id}"
        ),
    ),
    (
        r"Wildberries has not applied (?P<which>.+) \(nmID (?P<n>\d+)\) by (?P<u>.+) UTC: "
        r"uploaded again",
        N_("Wildberries has not applied {which*} (nmID {n}) by {u} UTC: uploaded again"),
    ),
    (
        r"Wildberries' task (?P<t>\d+) has no line for nmID (?P<n>\d+); its catalogue holds "
        r"(?P<h>\d+) for it: the price is in force",
        N_(
            "Wildberries' task {t} has no line for nmID {n}; its catalogue holds {h} for it: the "
            "price is in force"
        ),
    ),
    (
        r"Wildberries left nmID (?P<n>\d+) out of task (?P<t>\d+), and (?P<holds>its catalogue "
        r"does not list it|WB holds \d+ for it), not (?P<p>\d+): not applied, uploaded again",
        N_(
            "Wildberries left nmID {n} out of task {t}, and {holds*}, not {p}: not applied, "
            "uploaded again"
        ),
    ),
    (
        r"Wildberries' task (?P<t>\d+) ended with errors but lists no line for nmID (?P<n>\d+), "
        r"and (?P<holds>its catalogue does not list it|WB holds \d+ for it), not (?P<p>\d+): "
        r"not applied, for a reason WB did not give",
        N_(
            "Wildberries' task {t} ended with errors but lists no line for nmID {n}, and "
            "{holds*}, not {p}: not applied, for a reason WB did not give"
        ),
    ),
    (r"its catalogue does not list it", N_("its catalogue does not list it")),
    (r"WB holds (?P<h>\d+) for it", N_("WB holds {h} for it")),
    (
        r"Wildberries answered 208 with task (?P<t>\d+), whose lines give no price for nmID "
        r"(?P<n>\d+); its catalogue holds (?P<p>\d+) for it: the price is in force",
        N_(
            "Wildberries answered 208 with task {t}, whose lines give no price for nmID {n}; its "
            "catalogue holds {p} for it: the price is in force"
        ),
    ),
    (
        r"Wildberries' catalogue as read at (?P<a>.+) UTC has no good with vendor code (?P<v>.+): "
        r"it is read again at (?P<d>.+) UTC \(wb_catalogue_refresh\), and the price waits for "
        r"that read",
        N_(
            "Wildberries' catalogue as read at {a} UTC has no good with vendor code {v}: it is "
            "read again at {d} UTC (wb_catalogue_refresh), and the price waits for that read"
        ),
    ),
    (
        r"Wildberries took it in task (?P<t>\d+): its outcome is read later",
        N_("Wildberries took it in task {t}: its outcome is read later"),
    ),
    (
        r"Wildberries took it in task (?P<t>\d+): its outcome is read later; it went once the "
        r"catalogue showed (?P<p>\S+) for nmID (?P<n>\d+): (?P<which>.+) has landed",
        N_(
            "Wildberries took it in task {t}: its outcome is read later; it went once the "
            "catalogue showed {p} for nmID {n}: {which*} has landed"
        ),
    ),
    (
        r"Wildberries took it in task (?P<t>\d+): its outcome is read later; it went once "
        r"Wildberries' price quarantine listed (?P<p>\S+) for nmID (?P<n>\d+): (?P<which>.+) "
        r"has landed there, and this price replaces it",
        N_(
            "Wildberries took it in task {t}: its outcome is read later; it went once "
            "Wildberries' price quarantine listed {p} for nmID {n}: {which*} has landed there, "
            "and this price replaces it"
        ),
    ),
    (
        r"held: Wildberries' limit for the Prices category bars requests for (?P<w>\d+) s "
        r"\(X-Ratelimit-Retry\); sent then, not charged",
        N_(
            "held: Wildberries' limit for the Prices category bars requests for {w} s "
            "(X-Ratelimit-Retry); sent then, not charged"
        ),
    ),
    (
        r"waits for Wildberries' task (?P<t>\d+) of the same good \(one task per nmID\)",
        N_("waits for Wildberries' task {t} of the same good (one task per nmID)"),
    ),
    (
        r"not uploaded now: another worker's upload of nmID (?P<n>\d+) is in flight \(one task "
        r"per nmID\); this price waits for its outcome, not charged",
        N_(
            "not uploaded now: another worker's upload of nmID {n} is in flight (one task per "
            "nmID); this price waits for its outcome, not charged"
        ),
    ),
    (
        r"HTTP (?P<s>\d+): the upload's answer names no task id",
        N_("HTTP {s}: the upload's answer names no task id"),
    ),
    (
        r"HTTP 400 (?P<w>.*): Wildberries refused nmID (?P<n>\d+) of vendor code (?P<v>.+)",
        N_("HTTP 400 {w}: Wildberries refused nmID {n} of vendor code {v}"),
    ),
    (
        r"Wildberries answered 208 with task (?P<t>\d+), an earlier task it named for these "
        r"goods; its catalogue holds (?P<p>\d+) for nmID (?P<n>\d+): the price is in force",
        N_(
            "Wildberries answered 208 with task {t}, an earlier task it named for these goods; "
            "its catalogue holds {p} for nmID {n}: the price is in force"
        ),
    ),
    (
        r"Wildberries answered 208 with task (?P<t>\d+), an earlier task it named for these "
        r"goods, which has ended \((?P<why>.+)\): not applied now; uploaded again once WB makes "
        r"a new task",
        N_(
            "Wildberries answered 208 with task {t}, an earlier task it named for these goods, "
            "which has ended ({why*}): not applied now; uploaded again once WB makes a new task"
        ),
    ),
    (
        r"Wildberries has answered 208 with task (?P<t>\d+), an earlier task it named for these "
        r"goods, which has ended \((?P<why>.+)\), for (?P<s>\d+) s instead of making a new "
        r"task: the price is not applied",
        N_(
            "Wildberries has answered 208 with task {t}, an earlier task it named for these "
            "goods, which has ended ({why*}), for {s} s instead of making a new task: the price "
            "is not applied"
        ),
    ),
    # The words before review 32n (a history written then).
    (
        r"Wildberries answered 208 with task (?P<t>\d+), an identical upload made before; its "
        r"catalogue holds (?P<p>\d+) for nmID (?P<n>\d+): the price is in force",
        N_(
            "Wildberries answered 208 with task {t}, an identical upload made before; its "
            "catalogue holds {p} for nmID {n}: the price is in force"
        ),
    ),
    (
        r"Wildberries answered 208 with task (?P<t>\d+), an identical upload that has ended "
        r"\((?P<why>.+)\): not applied now; uploaded again once WB makes a new task",
        N_(
            "Wildberries answered 208 with task {t}, an identical upload that has ended "
            "({why*}): not applied now; uploaded again once WB makes a new task"
        ),
    ),
    (
        r"Wildberries has answered 208 with task (?P<t>\d+), an identical upload that has ended "
        r"\((?P<why>.+)\), for (?P<s>\d+) s instead of making a new task: the price is not "
        r"applied",
        N_(
            "Wildberries has answered 208 with task {t}, an identical upload that has ended "
            "({why*}), for {s} s instead of making a new task: the price is not applied"
        ),
    ),
    (r"it was cancelled \(status 4\)", N_("it was cancelled (status 4)")),
    (r"it failed the good: (?P<w>.*)", N_("it failed the good: {w}")),
    (
        r"it was processed then; WB holds (?P<h>\d+) for nmID (?P<n>\d+) now",
        N_("it was processed then; WB holds {h} for nmID {n} now"),
    ),
    (
        r"HTTP 400 (?P<w>.*): Wildberries' catalogue lists vendor code (?P<v>.+) as nmID "
        r"(?P<n>\d+) and (?P<holds>shows no price for it|holds \d+ for it), not (?P<p>\d+): not "
        r"applied, for a reason WB did not give",
        N_(
            "HTTP 400 {w}: Wildberries' catalogue lists vendor code {v} as nmID {n} and "
            "{holds*}, not {p}: not applied, for a reason WB did not give"
        ),
    ),
    (r"shows no price for it", N_("shows no price for it")),
    (r"holds (?P<h>\d+) for it", N_("holds {h} for it")),
    (
        r"HTTP 200: the catalogue's answer has no listGoods",
        N_("HTTP 200: the catalogue's answer has no listGoods"),
    ),
    (
        r"Wildberries holds (?P<p>\d+) for nmID (?P<n>\d+) already, but its price quarantine "
        r"could not be read (?P<r>\d+) times \((?P<c>.+)\): whether it holds an earlier price "
        r"for the good is not known",
        N_(
            "Wildberries holds {p} for nmID {n} already, but its price quarantine could not be "
            "read {r} times ({c*}): whether it holds an earlier price for the good is not known"
        ),
    ),
    (
        r"HTTP (?P<s>\d+): the quarantine list's answer has no quarantineGoods",
        N_("HTTP {s}: the quarantine list's answer has no quarantineGoods"),
    ),
    (
        r"Wildberries' catalogue has no good with vendor code (?P<v>.+)",
        N_("Wildberries' catalogue has no good with vendor code {v}"),
    ),
    (
        r"Wildberries said (?P<p>\d+) was set already for nmID (?P<n>\d+), and its catalogue "
        r"holds it: the price is in force",
        N_(
            "Wildberries said {p} was set already for nmID {n}, and its catalogue holds it: the "
            "price is in force"
        ),
    ),
    (
        r"HTTP 400 (?P<w>.*): the price is in force already \(its catalogue holds (?P<h>\d+)\)",
        N_("HTTP 400 {w}: the price is in force already (its catalogue holds {h})"),
    ),
    (
        r"HTTP 400 (?P<w>.*): the price is in force already",
        N_("HTTP 400 {w}: the price is in force already"),
    ),
    (
        r"Wildberries holds (?P<p>\d+) for nmID (?P<n>\d+) already, but its price quarantine "
        r"still holds (?P<h>\d+|another price) for it: confirmed in the seller's cabinet, it would "
        r"replace (?P=p)\. The seller should not confirm it but take the good out of the "
        r"quarantine at (?P=p) there \(Цены и скидки → Карантин цен\); this price waits, "
        r"uncharged, until the quarantine no longer lists the good, and is uploaded again over "
        r"the held one should that be confirmed",
        N_(
            "Wildberries holds {p} for nmID {n} already, but its price quarantine still holds "
            "{h*} for it: confirmed in the seller's cabinet, it would replace {p}. The seller "
            "should not confirm it but take the good out of the quarantine at {p} there (Цены и "
            "скидки → Карантин цен); this price waits, uncharged, until the quarantine no "
            "longer lists the good, and is uploaded again over the held one should that be "
            "confirmed"
        ),
    ),
    (r"another price", N_("another price")),
    (
        r"wb_token_file is not set or empty: Wildberries needs the seller's API token",
        N_("wb_token_file is not set or empty: Wildberries needs the seller's API token"),
    ),
    (
        r"HTTP 403 (?P<w>.*): Wildberries denies the account's access \(the token's user was "
        r"deleted, or the method is blocked for the seller\)",
        N_(
            "HTTP 403 {w}: Wildberries denies the account's access (the token's user was "
            "deleted, or the method is blocked for the seller)"
        ),
    ),
    (
        r"HTTP 429 (?P<w>.*): Wildberries' limit for the Prices category \((?P<what>upload|read|"
        r"task poll)\)",
        N_("HTTP 429 {w}: Wildberries' limit for the Prices category ({what*})"),
    ),
    (
        r"(?P<d>.+) \(upload\): its answer was lost: the good waits until Wildberries shows "
        r"whether it applied the upload, up to (?P<m>\d+) min \(at most until (?P<u>[^()]+) "
        r"UTC\)",
        N_(
            "{d*} (upload): its answer was lost: the good waits until Wildberries shows whether "
            "it applied the upload, up to {m} min (at most until {u} UTC)"
        ),
    ),
    (
        r"HTTP (?P<s>\d+) (?P<w>.*) \(upload\): it may have made a task all the same: the good "
        r"waits until Wildberries shows whether it applied the upload, up to (?P<m>\d+) min "
        r"\(at most until (?P<u>[^()]+) UTC\)",
        N_(
            "HTTP {s} {w} (upload): it may have made a task all the same: the good waits until "
            "Wildberries shows whether it applied the upload, up to {m} min (at most until {u} "
            "UTC)"
        ),
    ),
    (
        r"HTTP (?P<s>\d+) (?P<w>.*) \((?P<what>upload|read|task poll)\)",
        N_("HTTP {s} {w} ({what*})"),
    ),
    (r"upload", N_("upload")),
    (r"read", N_("read")),
    (r"task poll", N_("task poll")),
    (
        r"Wildberries refused the nmID: (?P<w>.*) \(task (?P<t>\d+)\)",
        N_("Wildberries refused the nmID: {w} (task {t})"),
    ),
    (
        r"Wildberries refused the price: (?P<w>.*) \(task (?P<t>\d+)\)",
        N_("Wildberries refused the price: {w} (task {t})"),
    ),
    (
        r"Wildberries: (?P<w>.*) \(task (?P<t>\d+)\)\. Wildberries sells at the old price until "
        r"the seller confirms the new one in the seller's cabinet \(Цены и скидки → Карантин "
        r"цен\) or a newer price is sent",
        N_(
            "Wildberries: {w} (task {t}). Wildberries sells at the old price until the seller "
            "confirms the new one in the seller's cabinet (Цены и скидки → Карантин цен) or a "
            "newer price is sent"
        ),
    ),
    (
        r"Wildberries sells at the old price until the seller confirms the new one in the "
        r"seller's cabinet \(Цены и скидки → Карантин цен\) or a newer price is sent",
        N_(
            "Wildberries sells at the old price until the seller confirms the new one in the "
            "seller's cabinet (Цены и скидки → Карантин цен) or a newer price is sent"
        ),
    ),
    (
        r"Wildberries: (?P<w>.*) \(task (?P<t>\d+)\)\. Wildberries does not change the price of "
        r"a good while it is in a sale for its high inventory \(often hours or days\): the "
        r"price is tried again, each try retry_max_delay after the last, and if the sale "
        r"outlasts the tries it is quarantined \(retry-limit\); the seller can see the sale in "
        r"Wildberries' seller cabinet and take the good out of it there where Wildberries "
        r"allows it",
        N_(
            "Wildberries: {w} (task {t}). Wildberries does not change the price of a good while "
            "it is in a sale for its high inventory (often hours or days): the price is tried "
            "again, each try retry_max_delay after the last, and if the sale outlasts the tries "
            "it is quarantined (retry-limit); the seller can see the sale in Wildberries' seller "
            "cabinet and take the good out of it there where Wildberries allows it"
        ),
    ),
    (r"Wildberries: (?P<w>.*) \(task (?P<t>\d+)\)", N_("Wildberries: {w} (task {t})")),
    # the marketplaces' shared checks of a price (targets/marketplace: items.py, money.py)
    (
        r"(?P<f>\w+) (?P<a>\S+): the channel takes whole units; never rounded silently \(set "
        r"rounding to half-up or down to round it\)",
        N_(
            "{f} {a}: the channel takes whole units; never rounded silently (set rounding to "
            "half-up or down to round it)"
        ),
    ),
    (
        r"(?P<f>\w+) (?P<a>\S+): the channel takes at most (?P<n>\d+) decimals; never rounded "
        r"silently \(set rounding to half-up or down to round it\)",
        N_(
            "{f} {a}: the channel takes at most {n} decimals; never rounded silently (set "
            "rounding to half-up or down to round it)"
        ),
    ),
    (
        r"(?P<f>\w+) (?P<a>\S+) rounds to 0: the channel refuses a zero price",
        N_("{f} {a} rounds to 0: the channel refuses a zero price"),
    ),
    (
        r"(?P<f>\w+) 0: the channel refuses a zero price",
        N_("{f} 0: the channel refuses a zero price"),
    ),
    (
        r"(?P<f>\w+) (?P<a>\S+) is above (?P<m>\S+), the most the channel takes",
        N_("{f} {a} is above {m}, the most the channel takes"),
    ),
    (
        r"the price is in (?P<c>\S+); the channel's account takes (?P<a>\S+) \(currency\): never "
        r"converted",
        N_("the price is in {c}; the channel's account takes {a} (currency): never converted"),
    ),
    (
        r"SKU (?P<s>.+) has no article \(Артикул\) in the CommerceML the service read, and the "
        r"channel names offers by their article \(sku_source=article\)",
        N_(
            "SKU {s} has no article (Артикул) in the CommerceML the service read, and the "
            "channel names offers by their article (sku_source=article)"
        ),
    ),
    # Yandex Market's refusal of a read-only Api-Key (targets/yandex_market/answers.py): its
    # own words kept as they are
    (
        r"HTTP 403: (?P<y>.+): the Api-Key's access is read-only",
        N_("HTTP 403: {y}: the Api-Key's access is read-only"),
    ),
    # Ozon's refusal of a key without the prices method's role (targets/ozon/answers.py): its
    # own words kept as they are
    (
        r"Ozon: (?P<o>.+): the API key has no role that may set prices",
        N_("Ozon: {o}: the API key has no role that may set prices"),
    ),
    (
        r"Ozon: (?P<o>.+): the seller has not accepted Ozon's current offer",
        N_("Ozon: {o}: the seller has not accepted Ozon's current offer"),
    ),
    (
        r"Ozon: (?P<o>.+): the API key is bound to other IP addresses than this server's",
        N_("Ozon: {o}: the API key is bound to other IP addresses than this server's"),
    ),
    # Ozon's (exchange/targets/ozon: answers.py, target.py): its hourly limit and "Circle is
    # open" are waits, not charged (research §1.3); its own words and codes kept as they are
    (
        r"Ozon: over Ozon's hourly limit of price updates of this product \(error limiting: "
        r"acquire limit per item\)",
        N_(
            "Ozon: over Ozon's hourly limit of price updates of this product (error limiting: "
            "acquire limit per item)"
        ),
    ),
    (
        r"held: Ozon refused an update of this product for its hourly limit \(error limiting: "
        r"acquire limit per item\); tried once more in (?P<w>\d+) s, not charged",
        N_(
            "held: Ozon refused an update of this product for its hourly limit (error limiting: "
            "acquire limit per item); tried once more in {w} s, not charged"
        ),
    ),
    (
        r"held: Ozon refused an update of this product for its hourly limit \(Ozon counts every "
        r"sender's updates\); goes in (?P<w>\d+) s, not charged",
        N_(
            "held: Ozon refused an update of this product for its hourly limit (Ozon counts every "
            "sender's updates); goes in {w} s, not charged"
        ),
    ),
    # The words stored before review ozon 34b (history rows keep them)
    (
        r"Ozon: more than 10 price updates of this product within an hour \(error limiting: "
        r"acquire limit per item\)",
        N_(
            "Ozon: more than 10 price updates of this product within an hour (error limiting: "
            "acquire limit per item)"
        ),
    ),
    # Ozon's ``updated: true`` for an item: the delivered row's detail (seller 34 item 6)
    (r"updated", N_("Ozon: updated")),
    # Wildberries' answer with no text of its own (``wildberries.answers.error_text``): alone,
    # and inside its other words (``detail_words`` says each value that is it)
    (r"\(no text\)", N_("(no text)")),
    (
        r"Ozon refused it: more than 10 price updates of this product within an hour; tried "
        r"once more in (?P<w>\d+) s, not charged",
        N_(
            "Ozon refused it: more than 10 price updates of this product within an hour; tried "
            "once more in {w} s, not charged"
        ),
    ),
    (
        r"held: Ozon refused an update of this product for its limit of 10 price updates an "
        r"hour \(Ozon counts every sender's updates\); goes in (?P<w>\d+) s, not charged",
        N_(
            "held: Ozon refused an update of this product for its limit of 10 price updates an "
            "hour (Ozon counts every sender's updates); goes in {w} s, not charged"
        ),
    ),
    (
        r"held: 10 price updates of this product sent within the hour \(Ozon's limit\); goes in "
        r"(?P<w>\d+) s, not charged",
        N_(
            "held: 10 price updates of this product sent within the hour (Ozon's limit); goes in "
            "{w} s, not charged"
        ),
    ),
    (
        r"held: Ozon answered \"Circle is open\" \(the prices method is blocked\); tried again "
        r"in (?P<w>\d+) s, not charged",
        N_(
            'held: Ozon answered "Circle is open" (the prices method is blocked); tried again '
            "in {w} s, not charged"
        ),
    ),
    (
        r"Ozon: (?P<s>.+): the method is blocked for a few minutes; tried again in (?P<w>\d+) "
        r"s, not charged",
        N_("Ozon: {s}: the method is blocked for a few minutes; tried again in {w} s, not charged"),
    ),
    (
        r"unchanged: Ozon holds this price already, not sent again",
        N_("unchanged: Ozon holds this price already, not sent again"),
    ),
    (
        r"unchanged: Ozon shows (?P<p>.+?) already \(read now\), not sent again",
        N_("unchanged: Ozon shows {p} already (read now), not sent again"),
    ),
    (
        r"Ozon shows (?P<p>.+?) already \(read before the channel's first send of it\), not sent",
        N_("Ozon shows {p} already (read before the channel's first send of it), not sent"),
    ),
    (
        r"Ozon gave no answer for offer_id (?P<o>.+) in its 200 \(its result holds none\): "
        r"whether Ozon took the price is unknown",
        N_(
            "Ozon gave no answer for offer_id {o} in its 200 (its result holds none): whether "
            "Ozon took the price is unknown"
        ),
    ),
    (
        r"(?P<w>Ozon: .+)\. Ozon holds (?P<h>an old price|old_price \S+) set outside 1C \(in the "
        r"seller's cabinet\), which the price (?P<p>\S+) sent does not fit: send an old price "
        r"from 1C \(map a 1C price type to old_price in the channel's price types\) or clear "
        r"the old price in Ozon's seller cabinet",
        N_(
            "{w}. Ozon holds {h*} set outside 1C (in the seller's cabinet), which the price {p} "
            "sent does not fit: send an old price from 1C (map a 1C price type to old_price in "
            "the channel's price types) or clear the old price in Ozon's seller cabinet"
        ),
    ),
    (
        r"(?P<w>Ozon: .+)\. Ozon holds (?P<h>an old price|old_price \S+) set outside 1C \(in the "
        r"seller's cabinet\), which the price (?P<p>\S+) sent does not fit: send this SKU's old "
        r"price from 1C \(price type (?P<t>.+), mapped to old_price; 1C ha(?:s sent none of it "
        r"for this SKU|d sent none for this SKU when Ozon refused this price)\) or clear the old "
        r"price in Ozon's seller cabinet",
        # "has sent none of it": the words before review words35b item 1, in stored histories
        N_(
            "{w}. Ozon holds {h*} set outside 1C (in the seller's cabinet), which the price {p} "
            "sent does not fit: send this SKU's old price from 1C (price type {t}, mapped to "
            "old_price; 1C had sent none for this SKU when Ozon refused this price) or clear the "
            "old price in Ozon's seller cabinet"
        ),
    ),
    (r"an old price", N_("an old price")),
    (r"old_price (?P<a>\S+)", N_("old_price {a}")),
    (r"Ozon: a 200 without a result per item", N_("Ozon: a 200 without a result per item")),
    (r"an item's result is not an object", N_("an item's result is not an object")),
    (r"Ozon: not updated: no error given", N_("Ozon: not updated: no error given")),
    (r"Ozon: not updated: (?P<s>.+)", N_("Ozon: not updated: {s}")),
    (
        r"Ozon: (?P<c>[A-Z_]+): no product with this offer_id in the seller's account",
        N_("Ozon: {c}: no product with this offer_id in the seller's account"),
    ),
    (
        r"Ozon refused the Client-Id \((?P<s>.+)\); check ozon_client_id",
        N_("Ozon refused the Client-Id ({s}); check ozon_client_id"),
    ),
    (
        r"Ozon refused the Client-Id or the API key \((?P<s>.+)\); check (?P<k>[\w, ]+)",
        N_("Ozon refused the Client-Id or the API key ({s}); check {k*}"),
    ),
    # the settings the line above names (``targets.ozon.answers.KEY_SETTINGS``)
    (
        r"ozon_client_id and ozon_api_key_file",
        N_("ozon_client_id and ozon_api_key_file"),
    ),
    (
        r"Ozon: (?P<s>.+): not an answer of the prices method \(check ozon_api_url\)",
        N_("Ozon: {s}: not an answer of the prices method (check ozon_api_url)"),
    ),
    (
        r"ozon_client_id or ozon_api_key_file is not set \(or the file is empty\)",
        N_("ozon_client_id or ozon_api_key_file is not set (or the file is empty)"),
    ),
    (r"Ozon: the read-back is unreadable", N_("Ozon: the read-back is unreadable")),
    (r"Ozon: /v1/roles answered no roles", N_("Ozon: /v1/roles answered no roles")),
    # Ozon's price rules, checked before a request (targets/ozon/target.py ``ozon_rule``)
    (
        r"old_price (?P<o>\S+) is below price (?P<p>\S+): Ozon refuses it \((?P<r>.+)\)",
        N_("old_price {o} is below price {p}: Ozon refuses it ({r})"),
    ),
    (
        r"old_price (?P<o>\S+) is 90 percent or more above price (?P<p>\S+): Ozon refuses it "
        r"\((?P<r>.+)\)",
        N_("old_price {o} is 90 percent or more above price {p}: Ozon refuses it ({r})"),
    ),
    (
        r"the gap between old_price (?P<o>\S+) and price (?P<p>\S+) is (?P<g>\S+), less than "
        r"Ozon's (?P<n>\S+) for this price \((?P<c>\w+)\)",
        N_(
            "the gap between old_price {o} and price {p} is {g}, less than Ozon's {n} for this "
            "price ({c})"
        ),
    ),
    (
        r"min_price (?P<l>\S+) is not below price (?P<p>\S+): Ozon refuses it",
        N_("min_price {l} is not below price {p}: Ozon refuses it"),
    ),
    (
        r"min_price (?P<l>\S+) is less than half of price (?P<p>\S+): Ozon refuses it "
        r"\((?P<r>.+)\)",
        N_("min_price {l} is less than half of price {p}: Ozon refuses it ({r})"),
    ),
    # Yandex Market's (exchange/targets/yandex_market): a 200 accepts, the read-back applies
    # (research §3.4): each wait for it is not charged; its own words kept as they are
    (
        r"HTTP 200: Yandex Market accepted offer (?P<o>.+); read back in (?P<w>\S+) s",
        N_("HTTP 200: Yandex Market accepted offer {o}; read back in {w} s"),
    ),
    (
        r"Yandex Market does not list offer (?P<o>.+) in its read-back yet; read back in "
        r"(?P<w>\S+) s",
        N_("Yandex Market does not list offer {o} in its read-back yet; read back in {w} s"),
    ),
    (
        r"Yandex Market accepted offer (?P<o>.+) but its read-back \(offer-prices\) does not "
        r"list it (?P<t>\S+) s later: no such offer in the cabinet's catalogue",
        N_(
            "Yandex Market accepted offer {o} but its read-back (offer-prices) does not list it "
            "{t} s later: no such offer in the cabinet's catalogue"
        ),
    ),
    (
        r"the quarantine list could not be read \((?P<c>.+)\); read again",
        N_("the quarantine list could not be read ({c*}); read again"),
    ),
    (
        r"the read-back waits for the per-minute budget \((?P<d>.+)\); read then",
        N_("the read-back waits for the per-minute budget ({d*}); read then"),
    ),
    (
        r"the read-back failed \((?P<d>.+)\); read again",
        N_("the read-back failed ({d*}); read again"),
    ),
    (
        r"Yandex Market took offer (?P<o>.+) and withholds its price in its price quarantine "
        r"\((?P<v>.+)\): release it with `exchange withheld release`, or in the cabinet",
        N_(
            "Yandex Market took offer {o} and withholds its price in its price quarantine ({v}): "
            "release it with `exchange withheld release`, or in the cabinet"
        ),
    ),
    # the same on a page, where the message's button releases it (seller 34 item 5:
    # ``page_words``), never the command the command line names
    (
        r"Yandex Market took offer (?P<o>.+) and withholds its price in its price quarantine "
        r"\((?P<v>.+)\): release it with the «Release to buyers» button, or in the cabinet",
        N_(
            "Yandex Market took offer {o} and withholds its price in its price quarantine ({v}): "
            "release it with the «Release to buyers» button, or in the cabinet"
        ),
    ),
    (
        # targets/yandex_market/answers.py ``behind_words`` (review ym34; of the look that wrote
        # them since rev35ym, «when looked up» since words38: the words before, kept in a
        # delivery's history, read the same way)
        r"(?:At the last look, |When looked up, )?Yandex Market h(?:olds|eld) value=(?P<v>\S+) "
        r"for offer (?P<o>.+?) already, but its price quarantine still holds (?P<h>.+) for it: "
        r"confirmed in the cabinet, it would replace "
        r"(?P=v)\. The seller should not confirm it but leave it, or set (?P=v) in the cabinet "
        r"\(a correct price releases the quarantine\); this price waits, uncharged, until the "
        r"quarantine no longer lists the offer, and is sent again over the held one should "
        r"that be confirmed",
        N_(
            "When looked up, Yandex Market held value={v} for offer {o} already, but its price "
            "quarantine still holds {h} for it: confirmed in the cabinet, it would replace {v}. "
            "The seller should not confirm it but leave it, or set {v} in the cabinet (a correct "
            "price releases the quarantine); this price waits, uncharged, until the quarantine "
            "no longer lists the offer, and is sent again over the held one should that be "
            "confirmed"
        ),
    ),
    (
        # the same where the read-back showed another price than this one (the quarantine
        # naming this one the last valid price; ``readback_quarantined=new``, or a confirm
        # landing between the list and the read-back): what each said, never «уже действовала»
        r"(?:At the last look|When looked up), Yandex Market's read-back showed value=(?P<s>\S+) "
        r"for offer "
        r"(?P<o>.+?), but its price quarantine still holds (?P<h>.+) for it and names "
        r"value=(?P<v>\S+), this price, as the last valid one: buyers see (?P=v) until the "
        r"held price is confirmed in the cabinet, which would put it live in place of "
        r"(?P=v)\. The seller should not confirm it but leave it, or set (?P=v) in the cabinet "
        r"\(a correct price releases the quarantine\); this price waits, uncharged, until the "
        r"quarantine no longer lists the offer, and is sent again over the held one should "
        r"that be confirmed",
        N_(
            "When looked up, Yandex Market's read-back showed value={s} for offer {o}, but its "
            "price quarantine still holds {h} for it and names value={v}, this price, as the "
            "last valid one: buyers see {v} until the held price is confirmed in the cabinet, "
            "which would put it live in place of {v}. The seller should not confirm it but "
            "leave it, or set {v} in the cabinet (a correct price releases the quarantine); "
            "this price waits, uncharged, until the quarantine no longer lists the offer, and "
            "is sent again over the held one should that be confirmed"
        ),
    ),
    (
        r"Yandex Market withholds another price of offer (?P<o>.+?) in its price quarantine, "
        r"(?P<h>.+), not this update's value=(?P<v>\S+), which it has not applied yet; read "
        r"back in (?P<w>\S+) s",
        N_(
            "Yandex Market withholds another price of offer {o} in its price quarantine, {h}, "
            "not this update's value={v}, which it has not applied yet; read back in {w} s"
        ),
    ),
    (
        r"Yandex Market accepted offer (?P<o>.+?) but (?P<t>\S+) s later still withholds "
        r"another price of it in its price quarantine, (?P<h>.+), not this update's "
        r"value=(?P<v>\S+): sent again",
        N_(
            "Yandex Market accepted offer {o} but {t} s later still withholds another price of it "
            "in its price quarantine, {h}, not this update's value={v}: sent again"
        ),
    ),
    (
        r"Yandex Market withholds offer (?P<o>.+?) at (?P<h>.+), not this delivery's "
        r"(?P<v>.+?): a confirm would publish Yandex's, so nothing was confirmed \(confirm it "
        r"in the cabinet if that price is right, or send a new price from 1C\)",
        N_(
            "Yandex Market withholds offer {o} at {h}, not this delivery's {v}: a confirm would "
            "publish Yandex's, so nothing was confirmed (confirm it in the cabinet if that price "
            "is right, or send a new price from 1C)"
        ),
    ),
    (
        r"the send could not be recorded before it left \((?P<e>[^)]+)\): not sent, sent "
        r"again later",
        N_("the send could not be recorded before it left ({e}): not sent, sent again later"),
    ),
    (
        r"HTTP 200, read back: offer (?P<o>'.*?') shows (?P<f>.+)",
        N_("HTTP 200, read back: offer {o} shows {f}"),
    ),
    # words38 item 7: an earlier update shown before ym_apply_timeout, the cause not known
    # yet (it may have landed after this one, or Yandex's quarantine holds this one)
    (
        r"Yandex Market does not show this update's (?P<f>.+?) for offer (?P<o>'.*?') yet but "
        r"an earlier update of it \((?P<e>[^)]+)\), not shown yet when this one was accepted: "
        r"that one may have landed after it, or Yandex may be holding this one in its price "
        r"quarantine; read back in (?P<w>\S+) s, sent again if not shown within "
        r"ym_apply_timeout",
        N_(
            "Yandex Market does not show this update's {f} for offer {o} yet but an earlier "
            "update of it ({e}), not shown yet when this one was accepted: that one may have "
            "landed after it, or Yandex may be holding this one in its price quarantine; read "
            "back in {w} s, sent again if not shown within ym_apply_timeout"
        ),
    ),
    # review words35b item 3: an earlier update landed after this one (§3.5: no order)
    (
        r"an earlier update of offer (?P<o>'.*?') \((?P<e>[^)]+)\), not shown yet when this one "
        r"was accepted, landed after it: Yandex Market shows that, not this update's "
        r"(?P<f>.+?); read back in (?P<w>\S+) s, sent again if not shown within "
        r"ym_apply_timeout",
        N_(
            "an earlier update of offer {o} ({e}), not shown yet when this one was accepted, "
            "landed after it: Yandex Market shows that, not this update's {f}; read back in {w} "
            "s, sent again if not shown within ym_apply_timeout"
        ),
    ),
    (
        r"an earlier update of offer (?P<o>'.*?') \((?P<e>[^)]+)\), not shown yet when this one "
        r"was accepted, landed after it: Yandex Market shows that, not this update's "
        r"(?P<f>.+?), (?P<t>\S+) s after Yandex Market accepted this one: sent again",
        N_(
            "an earlier update of offer {o} ({e}), not shown yet when this one was accepted, "
            "landed after it: Yandex Market shows that, not this update's {f}, {t} s after "
            "Yandex Market accepted this one: sent again"
        ),
    ),
    (
        r"Yandex Market accepted offer (?P<o>.+) but does not show the price (?P<t>\S+) s later, "
        r"and does not list it in its price quarantine: sent again",
        N_(
            "Yandex Market accepted offer {o} but does not show the price {t} s later, and does "
            "not list it in its price quarantine: sent again"
        ),
    ),
    (
        r"Yandex Market shows offer (?P<o>.+) as sent, but an earlier update of it was not "
        r"shown yet when this one was accepted: it counts once ym_apply_timeout has passed; "
        r"read back in (?P<w>\S+) s",
        N_(
            "Yandex Market shows offer {o} as sent, but an earlier update of it was not shown yet "
            "when this one was accepted: it counts once ym_apply_timeout has passed; read back "
            "in {w} s"
        ),
    ),
    (
        r"Yandex Market does not show offer (?P<o>.+)'s price yet; read back in (?P<w>\S+) s",
        N_("Yandex Market does not show offer {o}'s price yet; read back in {w} s"),
    ),
    (
        r"HTTP 400 \((?P<s>.+)\), yet Yandex Market's read-back shows value=(?P<v>\S+) for offer "
        r"(?P<o>'.*?'), its price quarantine lists nothing, and no earlier update of it may "
        r"still land: the price Yandex held then changed since \(a held price confirmed in the "
        r"cabinet, say\); sent again in (?P<w>\S+) s",
        N_(
            "HTTP 400 ({s}), yet Yandex Market's read-back shows value={v} for offer {o}, its "
            "price quarantine lists nothing, and no earlier update of it may still land: the "
            "price Yandex held then changed since (a held price confirmed in the cabinet, say); "
            "sent again in {w} s"
        ),
    ),
    (
        r"HTTP 400 \((?P<s>.+)\), read back: offer (?P<o>.+) holds the price as sent already",
        N_("HTTP 400 ({s}), read back: offer {o} holds the price as sent already"),
    ),
    (
        r"HTTP 400: Yandex Market refused offer (?P<o>'.*?'): (?P<s>.+); its read-back does "
        r"not show the price (?P<t>\S+) s later either",
        N_(
            "HTTP 400: Yandex Market refused offer {o}: {s}; its read-back does not show the "
            "price {t} s later either"
        ),
    ),
    (
        r"HTTP 400: Yandex Market refused offer (?P<o>'.*?'): (?P<s>.+)",
        N_("HTTP 400: Yandex Market refused offer {o}: {s}"),
    ),
    (
        r"HTTP 400: Yandex Market refused the request (?P<n>\d+) times, each naming other offers",
        N_("HTTP 400: Yandex Market refused the request {n} times, each naming other offers"),
    ),
    (
        r"(?P<s>.+): Yandex Market answered 200 with status ERROR \(an error, not an "
        r"acceptance\): sent again",
        N_(
            "{s}: Yandex Market answered 200 with status ERROR (an error, not an acceptance): "
            "sent again"
        ),
    ),
    (
        r"(?P<s>.+): Yandex Market's limit, waited for and still reached; sent again in "
        r"(?P<w>\S+) s",
        N_("{s}: Yandex Market's limit, waited for and still reached; sent again in {w} s"),
    ),
    (
        r"held: this worker's share \((?P<m>\d+)\) of Yandex Market's budget of (?P<n>\d+) "
        r"offers a minute is spent; sent in (?P<w>\d+) s, not charged",
        N_(
            "held: this worker's share ({m}) of Yandex Market's budget of {n} offers a minute "
            "is spent; sent in {w} s, not charged"
        ),
    ),
    (
        r"held: Yandex Market's budget of (?P<n>\d+) offers a minute is spent; sent in "
        r"(?P<w>\d+) s, not charged",
        N_(
            "held: Yandex Market's budget of {n} offers a minute is spent; sent in {w} s, not "
            "charged"
        ),
    ),
    (
        r"(?P<s>.+): Yandex Market refused the Api-Key \(ym_api_key_file\): make an Api-Key "
        r"token in the cabinet with the «Pricing» \(pricing\) or «All methods» access "
        r"\(Yandex's guide: (?P<g>\S+)\)",
        N_(
            "{s}: Yandex Market refused the Api-Key (ym_api_key_file): make an Api-Key token in "
            "the cabinet with the «Pricing» (pricing) or «All methods» access (Yandex's guide: "
            "{g})"
        ),
    ),
    (
        r"(?P<s>.+): Yandex Market refuses this key for this business \(ym_business_id\): check "
        r"the cabinet's id and that its API is enabled",
        N_(
            "{s}: Yandex Market refuses this key for this business (ym_business_id): check the "
            "cabinet's id and that its API is enabled"
        ),
    ),
    (
        r"(?P<s>.+): the Partner API's price methods are not at this address: check ym_api_url "
        r"\((?P<u>\S+)\)",
        N_("{s}: the Partner API's price methods are not at this address: check ym_api_url ({u})"),
    ),
    (
        r"(?P<s>.+): the cabinet is locked by Yandex Market \(a business in migration\)",
        N_("{s}: the cabinet is locked by Yandex Market (a business in migration)"),
    ),
    (
        r"ym_api_key_file is not set or empty: the Api-Key of the cabinet is needed",
        N_("ym_api_key_file is not set or empty: the Api-Key of the cabinet is needed"),
    ),
    # a release of a price Yandex Market no longer withholds, or not this channel's
    # (targets/yandex_market ``_not_withheld``, ``release_withheld``)
    (
        r"Yandex Market no longer withholds offer (?P<o>'.*?') and shows (?P<f>\w+)=(?P<a>\S+): "
        r"nothing to confirm",
        N_("Yandex Market no longer withholds offer {o} and shows {f}={a}: nothing to confirm"),
    ),
    (
        r"Yandex Market no longer withholds offer (?P<o>'.*?') and shows (?P<f>\w+)=(?P<h>\S+), "
        r"not (?P<a>\S+): a later update replaced this price, nothing to confirm",
        N_(
            "Yandex Market no longer withholds offer {o} and shows {f}={h}, not {a}: a later "
            "update replaced this price, nothing to confirm"
        ),
    ),
    (
        r"Yandex Market no longer withholds offer (?P<o>'.*?') and does not show it, not "
        r"(?P<a>\S+): a later update replaced this price, nothing to confirm",
        N_(
            "Yandex Market no longer withholds offer {o} and does not show it, not {a}: a later "
            "update replaced this price, nothing to confirm"
        ),
    ),
    (r"not a price this channel sent: (?P<w>.+)", N_("not a price this channel sent: {w*}")),
    (r"the SKU has no article", N_("the SKU has no article")),
    (
        r"Yandex Market confirmed the price \(price-quarantine/confirm\): it shows within "
        r"minutes, and the delivery ends delivered when the read-back shows it",
        N_(
            "Yandex Market confirmed the price (price-quarantine/confirm): it shows within "
            "minutes, and the delivery ends delivered when the read-back shows it"
        ),
    ),
    (
        r"SKUs (?P<a>'.*?') and (?P<b>'.*?') are one Yandex Market offer (?P<o>'.*?') \(Yandex "
        r"trims offerId, and under sku_source=article two goods may share an article\): each "
        r"would overwrite the other's price; give them distinct SKUs \(or articles\) in 1C",
        N_(
            "SKUs {a} and {b} are one Yandex Market offer {o} (Yandex trims offerId, and under "
            "sku_source=article two goods may share an article): each would overwrite the "
            "other's price; give them distinct SKUs (or articles) in 1C"
        ),
    ),
    (
        r"the SKU is empty once Yandex trims it \(offerId is 1-255 characters\)",
        N_("the SKU is empty once Yandex trims it (offerId is 1-255 characters)"),
    ),
    (
        r"offer (?P<o>'.*?') has no price mapped to value known yet \(Yandex takes discountBase "
        r"and minimumForBestseller only with the price\)",
        N_(
            "offer {o} has no price mapped to value known yet (Yandex takes discountBase and "
            "minimumForBestseller only with the price)"
        ),
    ),
    (
        r"(?P<d>.+); (?P<f>\S+) (?P<a>\S+) was not above (?P<o>\S+) (?P<p>\S+): it went as no "
        r"discount",
        N_("{d*}; {f} {a} was not above {o} {p}: it went as no discount"),
    ),
    (
        r"(?P<f>\S+) (?P<a>\S+) is not above (?P<o>\S+) (?P<p>\S+): no discount, it goes beside "
        r"the newest (?P=o) of its SKU",
        N_("{f} {a} is not above {o} {p}: no discount, it goes beside the newest {o} of its SKU"),
    ),
    (
        r"offer (?P<o>'.*?'): discountBase (?P<b>\S+) is not above value (?P<v>\S+)",
        N_("offer {o}: discountBase {b} is not above value {v}"),
    ),
    (
        r"offer (?P<o>'.*?'): a discount of (?P<p>\S+) % \(discountBase (?P<b>\S+), value "
        r"(?P<v>\S+)\); Yandex Market takes (?P<r>\S+) %",
        N_(
            "offer {o}: a discount of {p} % (discountBase {b}, value {v}); Yandex Market takes "
            "{r} %"
        ),
    ),
    (
        r"offer (?P<o>'.*?'): minimumForBestseller (?P<l>\S+) is not in 0 < x ≤ (?P<m>\S+)",
        N_("offer {o}: minimumForBestseller {l} is not in 0 < x ≤ {m}"),
    ),
    # a marketplace's items (exchange/targets/marketplace/items.py): an item that waits for
    # its companion price is not charged
    (
        r"alone beside the other known prices of its SKU it breaks a rule of (?P<t>"
        + _SUBJECT
        + r") \((?P<b>.+)\); 1C may send the other price type in its next package: looked at "
        r"again in (?P<w>\S+) s, quarantined if it still breaks the rule (?P<l>\d+) s from now, "
        r"not charged",
        N_(
            "alone beside the other known prices of its SKU it breaks a rule of {t&} ({b*}); 1C "
            "may send the other price type in its next package: looked at again in {w} s, "
            "quarantined if it still breaks the rule {l} s from now, not charged"
        ),
    ),
    # the same two with their end as a time too (review rev40 words: ``find`` showed "570 s
    # from now" as of the last look); the two below are the details written before
    (
        r"alone beside the other known prices of its SKU it breaks a rule of (?P<t>"
        + _SUBJECT
        + r") \((?P<b>.+)\); 1C may send the other price type in its next package: looked at "
        r"again in (?P<w>\S+) s, quarantined if it still breaks the rule (?P<l>\d+) s from now "
        r"\(at (?P<u>\S+ \S+) UTC\), not charged",
        N_(
            "alone beside the other known prices of its SKU it breaks a rule of {t&} ({b*}); 1C "
            "may send the other price type in its next package: looked at again in {w} s, "
            "quarantined if it still breaks the rule {l} s from now (at {u} UTC), not charged"
        ),
    ),
    (
        r"alone beside the other known prices of its SKU it breaks a rule of (?P<t>"
        + _SUBJECT
        + r") \((?P<b>.+)\); 1C may send the other price type in its next package: looked at "
        r"again in (?P<w>\S+) s, goes without (?P<f>\S+) (?P<l>\d+) s from now \(at "
        r"(?P<u>\S+ \S+) UTC\) if 1C sends none by then \(an old price not above the price is "
        r"no discount\), not charged",
        N_(
            "alone beside the other known prices of its SKU it breaks a rule of {t&} ({b*}); 1C "
            "may send the other price type in its next package: looked at again in {w} s, "
            "goes without {f} {l} s from now (at {u} UTC) if 1C sends none by then (an old "
            "price not above the price is no discount), not charged"
        ),
    ),
    # review rev39y H2: the wait ends with the price going without an old price below it
    (
        r"alone beside the other known prices of its SKU it breaks a rule of (?P<t>"
        + _SUBJECT
        + r") \((?P<b>.+)\); 1C may send the other price type in its next package: looked at "
        r"again in (?P<w>\S+) s, goes without (?P<f>\S+) (?P<l>\d+) s from now if 1C sends "
        r"none by then \(an old price not above the price is no discount\), not charged",
        N_(
            "alone beside the other known prices of its SKU it breaks a rule of {t&} ({b*}); 1C "
            "may send the other price type in its next package: looked at again in {w} s, "
            "goes without {f} {l} s from now if 1C sends none by then (an old price not above "
            "the price is no discount), not charged"
        ),
    ),
    # review rev41b H2/H3: a lone price of a pair waits a moment for 1C's other type
    # (``items._settles``)
    (
        r"taken in alone beside the known (?P<f>\S+) (?P<a>\S+) of its SKU; 1C may send the "
        r"other price type in its next package: looked at again in (?P<w>\S+) s, goes as it "
        r"is (?P<l>\d+) s from now \(at (?P<u>\S+ \S+) UTC\) if 1C sends none by then \(1C "
        r"writes a SKU's price types a moment apart: both go in one update\), not charged",
        N_(
            "taken in alone beside the known {f} {a} of its SKU; 1C may send the other price "
            "type in its next package: looked at again in {w} s, goes as it is {l} s from now "
            "(at {u} UTC) if 1C sends none by then (1C writes a SKU's price types a moment "
            "apart: both go in one update), not charged"
        ),
    ),
    # review rev43 H3: an old price or minimum with no main price of its SKU known
    # (``items._orphan_words``)
    (
        r"no (?P<m>\S+) of its SKU known to the channel yet: (?P<f>.+?) goes only beside 1C's "
        r"(?P=m), never alone beside a price the marketplace holds that 1C did not state with it",
        N_(
            "no {m} of its SKU known to the channel yet: {f} goes only beside 1C's {m}, never "
            "alone beside a price the marketplace holds that 1C did not state with it"
        ),
    ),
    (
        r"1C's (?P<m>\S+) of its SKU was refused \((?P<d>.+)\): (?P<f>.+?) goes only beside "
        r"1C's (?P=m), never alone beside a price the marketplace holds that 1C did not state "
        r"with it",
        N_(
            "1C's {m} of its SKU was refused ({d*}): {f} goes only beside 1C's {m}, never alone "
            "beside a price the marketplace holds that 1C did not state with it"
        ),
    ),
    # review rev42b: a new SKU's old price, its price a row later (``items._lone_beside``)
    (
        r"taken in alone, no (?P<f>\S+) of its SKU known to the channel yet; 1C may send the "
        r"other price type in its next package: looked at again in (?P<w>\S+) s, goes as it "
        r"is (?P<l>\d+) s from now \(at (?P<u>\S+ \S+) UTC\) if 1C sends none by then \(1C "
        r"writes a SKU's price types a moment apart: both go in one update\), not charged",
        N_(
            "taken in alone, no {f} of its SKU known to the channel yet; 1C may send the other "
            "price type in its next package: looked at again in {w} s, goes as it is {l} s from "
            "now (at {u} UTC) if 1C sends none by then (1C writes a SKU's price types a moment "
            "apart: both go in one update), not charged"
        ),
    ),
    (
        r"alone, with no price of its SKU known to the channel yet, it breaks a rule of (?P<t>"
        + _SUBJECT
        + r") \((?P<b>.+)\); 1C may send the other price type in its next package: looked at "
        r"again in (?P<w>\S+) s, quarantined if it still breaks the rule (?P<l>\d+) s from now "
        r"\(at (?P<u>\S+ \S+) UTC\), not charged",
        N_(
            "alone, with no price of its SKU known to the channel yet, it breaks a rule of {t&} "
            "({b*}); 1C may send the other price type in its next package: looked at again in "
            "{w} s, quarantined if it still breaks the rule {l} s from now (at {u} UTC), not "
            "charged"
        ),
    ),
    # review rev39 W3: the clearing of the strikethrough price 1C replaced held or its answer
    # lost, said after the marketplace's refusal of the price it carries (first: its wait may
    # end in any words)
    (
        r"(?P<b>.+); the service is sending the price (?P<p>\S+) without a strikethrough price "
        r"so that (?P<t>" + _SUBJECT + r") no longer shows (?P<m>\S+) (?P<a>\S+), the "
        r"strikethrough price 1C replaced: (?P<w>.+)",
        N_(
            "{b*}; the service is sending the price {p} without a strikethrough price so that "
            "{t&} no longer shows {m} {a}, the strikethrough price 1C replaced: {w*}"
        ),
    ),
    (
        r"(?P<b>.+); the service sent the price without a strikethrough price after this "
        r"refusal: (?P<w>.+)",
        N_(
            "{b*}; the service sent the price without a strikethrough price after this "
            "refusal: {w*}"
        ),
    ),
    # review ozwords38 item 4: the clearing of the strikethrough price 1C replaced refused,
    # the marketplace's code and meaning said (first: its refusal may end in any words)
    (
        r"(?P<b>.+); the service sent the price (?P<p>\S+) without a strikethrough price, and "
        r"(?P<t>" + _SUBJECT + r") refused it: (?P<r>.+)",
        N_(
            "{b*}; the service sent the price {p} without a strikethrough price, and {t&} "
            "refused it: {r*}"
        ),
    ),
    # review ozwords38 item 1: the clearing taken, the quarantined dependent price says so
    (
        r"(?P<b>.+); the service sent the price (?P<p>\S+) without a strikethrough price, so "
        r"(?P<t>" + _SUBJECT + r") no longer shows (?P<a>\S+), the strikethrough price 1C "
        r"replaced: buyers see (?P=p) without a discount until 1C sends a strikethrough price "
        r"that keeps the rule",
        N_(
            "{b*}; the service sent the price {p} without a strikethrough price, so {t&} no "
            "longer shows {a}, the strikethrough price 1C replaced: buyers see {p} without a "
            "discount until 1C sends a strikethrough price that keeps the rule"
        ),
    ),
    # review ozwords38 item 3: a quarantined min_price is no strikethrough price
    (
        r"(?P<b>.+); (?P<t>" + _SUBJECT + r") keeps (?P<m>\S+) (?P<a>\S+), the one 1C replaced "
        r"\(buyers do not see a minimum price\) until 1C's next price of this type goes",
        N_(
            "{b*}; {t&} keeps {m} {a}, the one 1C replaced (buyers do not see a minimum price) "
            "until 1C's next price of this type goes"
        ),
    ),
    # review rev39 W4: the words above as true now, a price of the SKU having gone since
    # without the strikethrough price (``ops.quarantine.shown_now``)
    (
        r"(?P<b>.+); (?P<t>" + _SUBJECT + r") showed (?P<m>\S+) (?P<a>\S+), the strikethrough "
        r"price 1C replaced, when this was quarantined; a later price of this SKU went without "
        r"it, so (?P=t) no longer shows it",
        N_(
            "{b*}; {t&} showed {m} {a}, the strikethrough price 1C replaced, when this was "
            "quarantined; a later price of this SKU went without it, so {t&} no longer shows it"
        ),
    ),
    # review words35b item 4: a new old price / discount base quarantined, nothing sent (rev37
    # W1: a cancel never ended it; the older words below stay for the rows that carry them)
    (
        r"(?P<b>.+); (?P<t>" + _SUBJECT + r") still shows (?P<m>\S+) (?P<a>\S+), the "
        r"strikethrough price 1C replaced: buyers see it until 1C's next price of this SKU goes "
        r"without it, or until a retry of this one sends the price without it again and the "
        r"marketplace takes it; a cancel leaves it shown",
        N_(
            "{b*}; {t&} still shows {m} {a}, the strikethrough price 1C replaced: buyers see it "
            "until 1C's next price of this SKU goes without it, or until a retry of this one "
            "sends the price without it again and the marketplace takes it; a cancel leaves it "
            "shown"
        ),
    ),
    (
        r"(?P<b>.+); (?P<t>" + _SUBJECT + r") still shows (?P<m>\S+) (?P<a>\S+), the "
        r"strikethrough price 1C replaced: buyers see it until this one is retried or "
        r"cancelled, or until 1C's next price of this SKU goes without it",
        N_(
            "{b*}; {t&} still shows {m} {a}, the strikethrough price 1C replaced: buyers see it "
            "until this one is retried or cancelled, or until 1C's next price of this SKU goes "
            "without it"
        ),
    ),
    # review ozonpair: what a person's decision on a price quarantined by a pair rule does;
    # review rev38b: said of what 1C sends meanwhile, the price held at the quarantine's time
    (
        r"(?P<b>.+); a new (?P<o>.+?) that 1C sends meanwhile waits for a person's decision on "
        r"this price: retrying it sends both together, cancelling it leaves the (?P<m>\S+) "
        r"(?P<t>" + _SUBJECT + r") holds \((?P<m2>\S+) (?P<a>\S+) when this was quarantined\)",
        N_(
            "{b*}; a new {o} that 1C sends meanwhile waits for a person's decision on this "
            "price: retrying it sends both together, cancelling it leaves the {m} {t&} holds "
            "({m2} {a} when this was quarantined)"
        ),
    ),
    (
        r"(?P<b>.+); a new (?P<o>.+?) that 1C sends meanwhile waits for a person's decision on "
        r"this price: retrying it sends both together, cancelling it leaves the (?P<m>\S+) "
        r"(?P<t>" + _SUBJECT + r") holds",
        N_(
            "{b*}; a new {o} that 1C sends meanwhile waits for a person's decision on this "
            "price: retrying it sends both together, cancelling it leaves the {m} {t&} holds"
        ),
    ),
    (
        r"(?P<b>.+); a new (?P<o>.+?) from 1C waits for a person's decision on this price: "
        r"retrying it sends both together, cancelling it leaves the (?P<m>\S+) it holds live "
        r"on (?P<t>" + _SUBJECT + ")",
        N_(
            "{b*}; a new {o} from 1C waits for a person's decision on this price: retrying it "
            "sends both together, cancelling it leaves the {m} it holds live on {t&}"
        ),
    ),
    (
        r"(?P<b>.+); a new (?P<o>.+?) from 1C waits for a person's decision on this price: "
        r"retrying it sends both together, cancelling it leaves (?P<m>\S+) (?P<a>\S+) live on "
        r"(?P<t>" + _SUBJECT + ")",
        N_(
            "{b*}; a new {o} from 1C waits for a person's decision on this price: retrying it "
            "sends both together, cancelling it leaves {m} {a} live on {t&}"
        ),
    ),
    # issue 32: a rule of two price types refuses the dependent one alone (an old price), in
    # a seller's words (review ozwords38 item 2); the API's field below, as older rows say it
    (
        r"(?P<b>.+); only this price is quarantined: the price went without it",
        N_("{b*}; only this price is quarantined: the price went without it"),
    ),
    (
        r"(?P<b>.+); only this price is quarantined: the price and the other new prices went "
        r"without it",
        N_(
            "{b*}; only this price is quarantined: the price and the other new prices went "
            "without it"
        ),
    ),
    (
        r"(?P<b>.+); only this price is quarantined: (?P<g>.+) went without it",
        N_("{b*}; only this price is quarantined: {g} went without it"),
    ),
    (
        r"(?P<t>" + _SUBJECT + r") refused its item by a rule of (?P<f>.+?) \((?P<d>.+)\): "
        r"only (?P=f) is quarantined; this price goes again without it in (?P<w>\S+) s, not "
        r"charged",
        N_(
            "{t&} refused its item by a rule of {f} ({d*}): only {f} is quarantined; this "
            "price goes again without it in {w} s, not charged"
        ),
    ),
    # review ozonpair: a new dependent price waits for a person's decision on the quarantined
    (
        r"waits for a person's decision on (?P<m>\S+) version (?P<v>\d+) of its SKU \(price "
        r"type (?P<pt>'.*?'), message_id (?P<id>\S+)\), quarantined by a rule of two price "
        r"types: beside the (?P=m) (?P<a>\S+) held on (?P<t>" + _SUBJECT + r") it would show "
        r"a pair 1C never stated; retrying (?P=id) sends both together, cancelling it lets this "
        r"price go beside (?P=m) (?P=a); looked at again in (?P<w>\S+) s, not charged",
        _WAITS_FOR_PERSON,
    ),
    # The same as written before review words34 ("beside the price 1000 ozon holds").
    (
        r"waits for a person's decision on (?P<m>\S+) version (?P<v>\d+) of its SKU \(price "
        r"type (?P<pt>'.*?'), message_id (?P<id>\S+)\), quarantined by a rule of two price "
        r"types: beside the (?P=m) (?P<a>\S+) (?P<t>\S+) holds it would show a pair 1C never "
        r"stated; retrying (?P=id) sends both together, cancelling it lets this price go beside "
        r"(?P=m) (?P=a); looked at again in (?P<w>\S+) s, not charged",
        _WAITS_FOR_PERSON,
    ),
    (
        r"waits for (?P<m>\S+) \(price type (?P<pt>'.*?'), version (?P<v>\d+)\), still to be "
        r"given to (?P<t>" + _SUBJECT + r"): alone it breaks a rule \((?P<b>.+)\); both go "
        r"together, looked at again in (?P<w>\S+) s, not charged",
        N_(
            "waits for {m} (price type {pt}, version {v}), still to be given to {t&}: alone it "
            "breaks a rule ({b*}); both go together, looked at again in {w} s, not charged"
        ),
    ),
    (
        r"the price is in (?P<c>\S+); the channel's account takes (?P<a>\S+) \(currency\): "
        r"never converted",
        N_("the price is in {c}; the channel's account takes {a} (currency): never converted"),
    ),
    (
        r"SKU (?P<s>.+) has no article \(Артикул\) in the CommerceML the service read, and the "
        r"channel names offers by their article \(sku_source=article\)",
        N_(
            "SKU {s} has no article (Артикул) in the CommerceML the service read, and the channel "
            "names offers by their article (sku_source=article)"
        ),
    ),
    (r"(?P<a>\S+) is not a price the channel takes", N_("{a} is not a price the channel takes")),
    (
        r"the articles could not be read: (?P<e>\w+)",
        N_("the articles could not be read: {e}"),
    ),
    (
        r"the waiting prices could not be read: (?P<e>\w+)",
        N_("the waiting prices could not be read: {e}"),
    ),
    # the 1C-Bitrix target's pause when the service's own database did not answer
    (
        r"the latest known prices could not be read: (?P<e>\w+)",
        N_("the latest known prices could not be read: {e}"),
    ),
    (
        r"(?P<r>invalid-contract|unknown-kind|unsupported-schema|version-conflict): (?P<d>.+)",
        N_("{r}: {d*}"),
    ),
)

# What the intake says of a row or an intent it refuses (exchange/intake: contracts.py, the
# JSON intake's and the brokers' intents.py and sources/common.py), as the history, a
# quarantine record's last error and the brokers' refusals on «Обмены 1С» say it. Field and
# setting names stay as they are (what 1C's programmer looks for); what Python's JSON parser
# said is said in Russian too.
_BROKER_WHERE = (
    r"(?P<w>rabbitmq queue \S+(?:, message_id \S+)?(?:, intent \d+)?|redis stream \S+, entry "
    r"\S+(?: \(no field intent: .*?\))?(?:, intent \d+)?)"
)
_INTAKE_DETAILS: tuple[tuple[str, str], ...] = (
    # where a broker's message came from, before what is wrong with it
    (_BROKER_WHERE + r": (?P<d>.+)", N_("{w*}: {d*}")),
    (r"rabbitmq queue (?P<q>\S+)", N_("rabbitmq queue {q}")),
    (r"(?P<w>.+), message_id (?P<m>\S+)", N_("{w*}, message_id {m}")),
    (r"(?P<w>.+), intent (?P<n>\d+)", N_("{w*}, intent {n}")),
    (
        r"redis stream (?P<s>\S+), entry (?P<e>\S+) \(no field intent: (?P<f>.*)\)",
        N_("redis stream {s}, entry {e} (no field intent: {f})"),
    ),
    (r"redis stream (?P<s>\S+), entry (?P<e>\S+)", N_("redis stream {s}, entry {e}")),
    # why a broker source does not consume (contract 15: status's cause «source»)
    (
        r"the broker cancelled the consumer \(the queue was deleted or moved\)",
        N_("the broker cancelled the consumer (the queue was deleted or moved)"),
    ),
    (r"the queue (?P<q>.+) does not exist", N_("the queue {q} does not exist")),
    (r"the (?:broker|server) refused the credentials", N_("the broker refused the credentials")),
    (
        r"the broker closed the connection between two pulls",
        N_("the broker closed the connection between two pulls"),
    ),
    # what a broker source refuses before reading the body (contract 15)
    (
        r"the message is (?P<n>\d+) bytes, more than EXCHANGE_SOURCE_MAX_BYTES \((?P<m>\d+)\): "
        r"not read",
        N_("the message is {n} bytes, more than EXCHANGE_SOURCE_MAX_BYTES ({m}): not read"),
    ),
    (
        r"the entry names the field intent (?P<n>\d+) times",
        N_("the entry names the field intent {n} times"),
    ),
    (
        r"the stream no longer holds this entry \(trimmed by MAXLEN or XTRIM while pending\)",
        N_("the stream no longer holds this entry (trimmed by MAXLEN or XTRIM while pending)"),
    ),
    # the body of a JSON intake's request or of a broker's message
    (r"the body is not UTF-8 text", N_("the body is not UTF-8 text")),
    (
        r"the body nests (?P<d>\d+) levels deep, more than the (?P<m>\d+) allowed \(a payload "
        r"may nest at most (?P<p>\d+)\)",
        N_(
            "the body nests {d} levels deep, more than the {m} allowed (a payload may nest at "
            "most {p})"
        ),
    ),
    (
        r"the body names key (?P<k>.+) twice in one object",
        N_("the body names key {k} twice in one object"),
    ),
    (r"the body is not JSON: (?P<e>.+)", N_("the body is not JSON: {e*}")),
    (r'the body must be \{"intents": \[\.\.\.\]\}', N_('the body must be {"intents": [...]}')),
    (
        r'the body must be an intent, a list of intents or \{"intents": \[\.\.\.\]\}',
        N_('the body must be an intent, a list of intents or {"intents": [...]}'),
    ),
    (r'"intents" must be a list', N_('"intents" must be a list')),
    (
        r"the body holds more than (?P<n>\d+) arrays and objects, the most (?P<m>\d+) intents "
        r"may \((?P<p>\d+) per intent\)",
        N_(
            "the body holds more than {n} arrays and objects, the most {m} intents may ({p} per "
            "intent)"
        ),
    ),
    (
        r"the body holds more than (?P<n>\d+) values and keys, the most (?P<m>\d+) intents "
        r"may \((?P<p>\d+) per intent\)",
        N_(
            "the body holds more than {n} values and keys, the most {m} intents may ({p} per "
            "intent)"
        ),
    ),
    (r"the body holds no intent", N_("the body holds no intent")),
    (
        r"at most (?P<n>\d+) intents per (?:message|request), not (?P<m>\d+)",
        N_("at most {n} intents per message, not {m}"),
    ),
    (r"intents\[(?P<i>\d+)\] is not an object", N_("intents[{i}] is not an object")),
    # one intent's fields (the JSON intake's shape, before the staging row's rules)
    (r"unknown fields: (?P<f>.+)", N_("unknown fields: {f}")),
    (
        r"kind must be a string of 1 to 64 characters",
        N_("kind must be a string of 1 to 64 characters"),
    ),
    (
        r"(?P<f>\w+) must be a string of at most (?P<n>\d+) characters",
        N_("{f} must be a string of at most {n} characters"),
    ),
    (r"aggregate_version must be an integer", N_("aggregate_version must be an integer")),
    (
        r"payload must be a JSON object \(or its text\)",
        N_("payload must be a JSON object (or its text)"),
    ),
    # a staging row's rules (contracts.validate)
    (r"unreadable staging row: (?P<d>.+)", N_("unreadable staging row: {d;}")),
    (r"(?P<f>\w+) is not valid UTF-8 text", N_("{f} is not valid UTF-8 text")),
    (
        r"aggregate_version (?P<v>.+) is not a whole number",
        N_("aggregate_version {v} is not a whole number"),
    ),
    (r"created_at (?P<v>.+) is not a time", N_("created_at {v} is not a time")),
    (r"kind (?P<k>.+) is not configured", N_("kind {k} is not configured")),
    (
        r"aggregate must be non-empty printable text",
        N_("aggregate must be non-empty printable text"),
    ),
    (r"source_ref must not contain NUL bytes", N_("source_ref must not contain NUL bytes")),
    (
        r"aggregate_version must be 1 or more, not (?P<v>\S+)",
        N_("aggregate_version must be 1 or more, not {v}"),
    ),
    (
        r"aggregate_version (?P<v>\S+) is not a whole number from 1 to 2\^63-1 \(BIGINT\)",
        N_("aggregate_version {v} is not a whole number from 1 to 2^63-1 (BIGINT)"),
    ),
    (
        r"aggregate_version (?P<v>\S+) is not below 2\^62 \((?P<p>\d+)\): the numbers from 2\^62 "
        r"up are kept for the 1C exchange's packages",
        N_(
            "aggregate_version {v} is not below 2^62 ({p}): the numbers from 2^62 up are kept for "
            "the 1C exchange's packages"
        ),
    ),
    (
        r"schema_version (?P<s>.+) of kind (?P<k>.+) is not supported \(supported: (?P<l>.*)\)",
        N_("schema_version {s} of kind {k} is not supported (supported: {l})"),
    ),
    (
        r"(?P<f>\w+) contains an unpaired UTF-16 surrogate",
        N_("{f} contains an unpaired UTF-16 surrogate"),
    ),
    (r"(?P<f>\w+) must be text, not (?P<t>\w+)", N_("{f} must be text, not {t}")),
    (
        r"(?P<f>\w+) is too long: (?P<n>\d+) characters, the contract allows at most (?P<m>\d+) "
        r"\(VARCHAR\((?P<v>\d+)\)\)",
        N_("{f} is too long: {n} characters, the contract allows at most {m} (VARCHAR({v}))"),
    ),
    (
        r"payload nests (?P<d>\d+) levels deep; the contract allows at most (?P<m>\d+)",
        N_("payload nests {d} levels deep; the contract allows at most {m}"),
    ),
    (r"payload is not valid JSON: (?P<e>.+)", N_("payload is not valid JSON: {e*}")),
    (
        r"payload must be a JSON object, not (?P<t>\w+)",
        N_("payload must be a JSON object, not {t}"),
    ),
    (
        r"price payload: sku (?P<s>.+), price_type (?P<t>.+) does not belong to aggregate "
        r"(?P<a>.+): one aggregate is one price, named <sku>/<price_type> \((?P<n>.+)\), or the "
        r"sku alone where a store has one price type",
        N_(
            "price payload: sku {s}, price_type {t} does not belong to aggregate {a}: one "
            "aggregate is one price, named <sku>/<price_type> ({n}), or the sku alone where a "
            "store has one price type"
        ),
    ),
    (  # exchange/intake/staging_store.py: one message per aggregate version
        r"version (?P<v>\d+) of (?P<k>\S+) (?P<a>.+) was already taken as (?P<m>\S+) with a "
        r"different payload",
        N_("version {v} of {k@} {a} was already taken as {m} with a different payload"),
    ),
    (  # exchange/intake/staging_store.py: an aggregate's sku and price type are fixed
        r"aggregate (?P<a>.+) is the price of sku (?P<s>.+) in price type (?P<t>.+), fixed by its "
        r"first version; this row names (?P<d>.+)\. One aggregate is one price: write this "
        r"price under aggregate (?P<w>.+) \(<sku>/<price_type>\)",
        N_(
            "aggregate {a} is the price of sku {s} in price type {t}, fixed by its first version; "
            "this row names {d*}. One aggregate is one price: write this price under aggregate "
            "{w} (<sku>/<price_type>)"
        ),
    ),
    # what such a row names instead (``{d*}`` above)
    (
        r"sku (?P<g>.+?) \(not (?P<f>.+?)\) and price_type (?P<h>.+) \(not (?P<e>.+)\)",
        N_("sku {g} (not {f}) and price_type {h} (not {e})"),
    ),
    (r"sku (?P<g>.+) \(not (?P<f>.+)\)", N_("sku {g} (not {f})")),
    (r"price_type (?P<g>.+) \(not (?P<f>.+)\)", N_("price_type {g} (not {f})")),
    (  # contract 15: one (sku, price type), one aggregate
        r"sku (?P<s>.+) in price type (?P<t>.+) belongs to aggregate (?P<o>.+), the first that "
        r"carried it; this row names it under aggregate (?P<a>.+)\. One sku in one price type "
        r"is one aggregate: write this price under aggregate (?P<w>.+)",
        N_(
            "sku {s} in price type {t} belongs to aggregate {o}, the first that carried it; this "
            "row names it under aggregate {a}. One sku in one price type is one aggregate: write "
            "this price under aggregate {w}"
        ),
    ),
    (  # contract 15: within one 1C package the later offer wins
        r"повтор в пакете: a later offer of the same 1C package maps to aggregate (?P<a>.+) "
        r"too, with another price; the later one in the document wins and this one is not sent "
        r"\(two goods sharing one Артикул, or one Ид twice\)",
        N_(
            "повтор в пакете: a later offer of the same 1C package maps to aggregate {a} too, "
            "with another price; the later one in the document wins and this one is not sent (two "
            "goods sharing one Артикул, or one Ид twice)"
        ),
    ),
    # each part names its field once, in Russian with the payload's key (``_field_problems``)
    (r"price payload: (?P<p>.+)", N_("price payload: {p+}")),
    (r"the row could not be checked: (?P<e>.+)", N_("the row could not be checked: {e}")),
    # what Python's JSON parser says (json.decoder), and the contract's own JSON rules
    (
        r"(?P<m>.+): line (?P<l>\d+) column (?P<c>\d+) \(char (?P<p>\d+)\)",
        N_("{m*}: line {l} column {c} (char {p})"),
    ),
    (r"Expecting value", N_("Expecting value")),
    (
        r"Expecting property name enclosed in double quotes",
        N_("Expecting property name enclosed in double quotes"),
    ),
    (r"Expecting ':' delimiter", N_("Expecting ':' delimiter")),
    (r"Expecting ',' delimiter", N_("Expecting ',' delimiter")),
    (r"Unterminated string starting at", N_("Unterminated string starting at")),
    (r"Invalid control character at", N_("Invalid control character at")),
    (r"Invalid \\escape", N_("Invalid \\escape")),
    (r"Invalid \\uXXXX escape", N_("Invalid \\uXXXX escape")),
    (r"Extra data", N_("Extra data")),
    (
        r"Illegal trailing comma before end of (?:object|array)",
        N_("Illegal trailing comma before end of object"),
    ),
    (r"key (?P<k>.+) appears twice in one object", N_("key {k} appears twice in one object")),
    (
        r"(?P<n>\S+) is not a number the contract allows",
        N_("{n} is not a number the contract allows"),
    ),
)
# The parts of a price payload's refusal ("price: must be …; currency: must be …"): a field,
# then what is wrong with its value (contracts.py's checks and pydantic's own words).
_FIELD_PROBLEMS: tuple[tuple[str, str], ...] = (
    (r"must be a string", N_("must be a string")),
    (r"must not contain control characters", N_("must not contain control characters")),
    (r"must be 1 to 100 characters", N_("must be 1 to 100 characters")),
    (
        r"must be three upper-case letters, e\.g\. RUB",
        N_("must be three upper-case letters, e.g. RUB"),
    ),
    (
        r'must be a decimal string such as "840\.00" or a JSON number',
        N_('must be a decimal string such as "840.00" or a JSON number'),
    ),
    (r"must be written without an exponent", N_("must be written without an exponent")),
    (
        r'must be a plain decimal such as "840\.00" \(ASCII digits and at most one point; no '
        r"spaces, line breaks, '\+' or other characters\), not (?P<v>.+)",
        N_(
            'must be a plain decimal such as "840.00" (ASCII digits and at most one point; no '
            "spaces, line breaks, '+' or other characters), not {v}"
        ),
    ),
    (r"must be a plain decimal", N_("must be a plain decimal")),
    (r"must be finite", N_("must be finite")),
    (r"must be at least 0 and below 10\^12", N_("must be at least 0 and below 10^12")),
    (
        r"must have at most (?P<n>\d+) decimal places",
        N_("must have at most {n} decimal places"),
    ),
    (r"is not a field of this schema", N_("is not a field of this schema")),
    (r"Field required", N_("Field required")),
)
_FIELD_PROBLEMS_RE = tuple((re.compile(p, re.DOTALL), ru) for p, ru in _FIELD_PROBLEMS)
# A rule's words joined with what follows them ("{b*}; a new old_price from 1C waits …"),
# tried before every other: a rule's own words end in a group that takes anything («Ozon
# refuses it (…)»), and where the channel is named «channel ozon (Ozon)» the joined words end
# in «)» too, so the rule's pattern took them whole and left the rest English (words38 item 4:
# a Russian export's last error stayed English). Otherwise in their order.
_JOINED = "(?P<b>.+); "
_DETAILS_RE = tuple(
    (re.compile(p, re.DOTALL), ru)
    for p, ru in sorted(_DETAILS + _INTAKE_DETAILS, key=lambda d: not d[0].startswith(_JOINED))
)


# A price payload's fields, as a refusal names them: once, in Russian with the key beside it.
_PRICE_FIELDS: dict[str, str] = {
    "price": "цена",
    "currency": "валюта",
    "sku": "артикул",
    "price_type": "вид цены",
}


def _field_problems(text: str) -> str:
    """A price payload's refusal («price: must be finite; currency: …») in Russian, part by
    part, each field named once: «цена (price): число должно быть конечным»; another field
    «поле цены colour: …»; a part without a field «цена: …»; a problem no pattern knows as
    it is."""
    said = []
    for part in re.split(r"; (?=[\w.]+: )", text):  # "; " inside a problem is not a new part
        field, colon, problem = part.partition(": ")
        if not colon or " " in field:
            field, problem = "", part
        for pattern, message in _FIELD_PROBLEMS_RE:
            found = pattern.fullmatch(problem)
            if found:
                problem = _(message, "ru").format(**found.groupdict())
                break
        if not field:
            named = "цена"
        elif field in _PRICE_FIELDS:
            named = f"{_PRICE_FIELDS[field]} ({field})"
        else:
            named = f"поле цены {field}"
        said.append(f"{named}: {problem}")
    return "; ".join(said)


# What Wildberries' answer without words of its own is said as (``wildberries.answers``).
NO_TEXT = "(no text)"


def detail_words(text: str) -> str:
    """A history detail in Russian (a ``{name*}`` in the Russian text is itself a detail, said
    in Russian in turn; a ``{name;}`` details apart by "; "; a ``{name+}`` a list of a
    payload's field problems; a ``{name@}`` a kind, by its Russian name; a ``{name&}`` a
    channel, named as a marketplace's items name it: ``subject_said``); one that matches
    nothing as it is."""
    for pattern, message in _DETAILS_RE:
        found = pattern.fullmatch(text)
        if found:
            russian = _(message, "ru")
            values = dict(found.groupdict())
            for key in list(values):
                if values[key] == NO_TEXT:  # Wildberries' answer without words, in Russian
                    values[key] = _(NO_TEXT, "ru")  # its msgid: the "(no text)" detail above
                if "{" + key + "*}" in russian:
                    russian = russian.replace("{" + key + "*}", "{" + key + "}")
                    values[key] = detail_words(values[key])
                if "{" + key + "+}" in russian:
                    russian = russian.replace("{" + key + "+}", "{" + key + "}")
                    values[key] = _field_problems(values[key])
                if "{" + key + "^}" in russian:  # a target, by its Russian name
                    russian = russian.replace("{" + key + "^}", "{" + key + "}")
                    values[key] = target_said(values[key], "ru")
                if "{" + key + "&}" in russian:  # a channel, named (``subject_said``)
                    russian = russian.replace("{" + key + "&}", "{" + key + "}")
                    values[key] = subject_said(values[key], "ru")
                if "{" + key + "@}" in russian:  # a kind, by its Russian name
                    russian = russian.replace("{" + key + "@}", "{" + key + "}")
                    values[key] = name("kind", values[key], "ru")
                if "{" + key + ";}" in russian:
                    russian = russian.replace("{" + key + ";}", "{" + key + "}")
                    values[key] = "; ".join(detail_words(part) for part in values[key].split("; "))
            return _waits_said(russian, values, "ru").format(**values)
    return text


def messages_counted(count: int, lang: Lang) -> str:
    """«2 сообщения», "2 messages"."""
    return ngettext("{count} message", "{count} messages", count, lang).format(count=count)


def versions_counted(count: int, lang: Lang) -> str:
    """Later versions waiting: «1 более поздняя версия», «3 более поздние версии», «5 более
    поздних версий»; "3 later versions"."""
    return ngettext("{count} later version", "{count} later versions", count, lang).format(
        count=count
    )


# -- what 1C shows its administrator (contract 9a) ---------------------------------------------
# The service's texts stay English where they are made and recorded (cml_exchanges, the log,
# `exchange status`); the answer to 1C says them in Russian, as 1C-Bitrix's own component does
# (catalog.import.1c: its lang/ru messages, e.g. «Ошибка авторизации. Неверное имя
# пользователя или пароль.»), in windows-1251 (exchange/web/onec.py). A whole text is tried
# first; else each part of a summary ("; " between parts). A name, a number, an element or a
# setting inside a text is kept as it is.
_F = r"(?P<f>.+?)"
_N = r"(?P<n>\d+)"
_ONEC_WHOLE: tuple[tuple[str, str], ...] = (
    (
        r"the 1C exchange is closed: EXCHANGE_1C_USER and EXCHANGE_1C_PASSWORD are not set on "
        r"the service",
        N_(
            "the 1C exchange is closed: EXCHANGE_1C_USER and EXCHANGE_1C_PASSWORD are not set on "
            "the service"
        ),
    ),
    (r"unknown exchange type (?P<t>.*)", N_("unknown exchange type {t}")),
    (
        r"not authorized: wrong user or password, or no session \(checkauth\)",
        N_("not authorized: wrong user or password, or no session (checkauth)"),
    ),
    (
        r"wrong user or password \(HTTP Basic\)",
        N_("wrong user or password (HTTP Basic)"),
    ),
    (
        r"too many wrong passwords from this address: try again in (?P<s>\d+) s",
        N_("too many wrong passwords from this address: try again in {s} s"),
    ),
    (r"unknown mode (?P<m>.*)", N_("unknown mode {m}")),
    (r"nothing to deactivate: prices only", N_("nothing to deactivate: prices only")),
    (_N + r" bytes of " + _F + r" received", N_("{n} bytes of {f} received")),
    (r"upload of " + _F + r" failed", N_("upload of {f} failed")),
    (
        r"upload of " + _F + r" was cut short: (?P<got>\d+) of (?P<want>\d+) bytes",
        N_("upload of {f} was cut short: {got} of {want} bytes"),
    ),
    (
        _F + r" is being imported: send it later",
        N_("{f} is being imported: send it later"),
    ),
    (
        r"a part of " + _F + r" is larger than file_limit=(?P<n>\d+) bytes \(init announced it\)",
        N_("a part of {f} is larger than file_limit={n} bytes (init announced it)"),
    ),
    (r"file " + _F + r" is larger than (?P<n>\d+) bytes", N_("file {f} is larger than {n} bytes")),
    (
        r"reading " + _F + r": " + _N + r" offers so far",
        N_("reading {f}: {n} offers so far"),
    ),
    (
        r"the service's database is unavailable: (?P<e>.*)",
        N_("the service's database is unavailable: {e}"),
    ),
    (r"internal error: (?P<e>.*)", N_("internal error: {e}")),
    (r"archive unpacked", N_("archive unpacked")),
    (r"not an XML file: accepted and dropped", N_("not an XML file: accepted and dropped")),
    (
        r"file " + _F + r" was not uploaded in this exchange",
        N_("file {f} was not uploaded in this exchange"),
    ),
    (r"exchange complete", N_("exchange complete")),
    (r"orders are not imported by this service", N_("orders are not imported by this service")),
    (r"no orders here", N_("no orders here")),
    (
        r"this file was staged before \(package version (?P<v>\d+)\): nothing new",
        N_("this file was staged before (package version {v}): nothing new"),
    ),
    (
        r"not a CommerceML offers or catalogue file: nothing to read",
        N_("not a CommerceML offers or catalogue file: nothing to read"),
    ),
    (
        r"catalogue read: (?P<t>\d+) price types, (?P<a>\d+) articles kept",
        N_("catalogue read: {t} price types, {a} articles kept"),
    ),
    (
        r"no price of a mapped type: the file has (?P<found>.*); map them in "
        r"EXCHANGE_1C_PRICE_TYPES",
        N_("no price of a mapped type: the file has {found}; map them in EXCHANGE_1C_PRICE_TYPES"),
    ),
    (
        r"not well-formed XML at line (?P<l>\d+), column (?P<c>\d+): (?P<e>.*)",
        N_("not well-formed XML at line {l}, column {c}: {e}"),
    ),
    (
        r"not a CommerceML file: the root element is <(?P<r>[^>]*)>, not <(?P<root>[^>]*)>",
        N_("not a CommerceML file: the root element is <{r}>, not <{root}>"),
    ),
    (r"the file is empty", N_("the file is empty")),
    (r"the file has no root element", N_("the file has no root element")),
    (
        r"no root element in the first " + _N + r" bytes of the file",
        N_("no root element in the first {n} bytes of the file"),
    ),
    (
        r"a document type declaration \(DTD\) is not allowed in a CommerceML file",
        N_("a document type declaration (DTD) is not allowed in a CommerceML file"),
    ),
    (
        r"entity declarations are not allowed in a CommerceML file",
        N_("entity declarations are not allowed in a CommerceML file"),
    ),
    (
        r"external entities are not allowed in a CommerceML file",
        N_("external entities are not allowed in a CommerceML file"),
    ),
    (r"elements nested deeper than " + _N, N_("elements nested deeper than {n}")),
    (r"the file is nested too deeply", N_("the file is nested too deeply")),
    (
        r"a text node longer than " + _N + r" characters in <(?P<e>[^>]*)>",
        N_("a text node longer than {n} characters in <{e}>"),
    ),
    (
        r"more than " + _N + r" comments or processing instructions in the file",
        N_("more than {n} comments or processing instructions in the file"),
    ),
    (
        r"a text longer than " + _N + r" bytes with no element in it",
        N_("a text longer than {n} bytes with no element in it"),
    ),
    (
        r"more than " + _N + r" fields in one <(?P<e>[^>]*)>",
        N_("more than {n} fields in one <{e}>"),
    ),
    (r"file name " + _F + r" is not allowed", N_("file name {f} is not allowed")),
    (
        r"file name " + _F + r" holds a control character: not allowed",
        N_("file name {f} holds a control character: not allowed"),
    ),
    (
        r"file name " + _F + r" is an absolute path: not allowed",
        N_("file name {f} is an absolute path: not allowed"),
    ),
    (r"file name " + _F + r" names no file", N_("file name {f} names no file")),
    (
        r"file name " + _F + r" leaves the exchange's folder: not allowed",
        N_("file name {f} leaves the exchange's folder: not allowed"),
    ),
    (
        r"file name "
        + _F
        + r" is too long: a folder or file name may hold at most "
        + _N
        + r" bytes",
        N_("file name {f} is too long: a folder or file name may hold at most {n} bytes"),
    ),
    (r"file name " + _F + r" is reserved", N_("file name {f} is reserved")),
    (r"file name " + _F + r" is not allowed: (?P<e>.*)", N_("file name {f} is not allowed: {e}")),
    (
        r"archive member " + _F + r" is a link: not allowed",
        N_("archive member {f} is a link: not allowed"),
    ),
    (
        _F + r" holds more than " + _N + r" XML files: not unpacked",
        N_("{f} holds more than {n} XML files: not unpacked"),
    ),
    (
        r"archive member " + _F + r" expands more than (?P<r>\S+) times",
        N_("archive member {f} expands more than {r} times"),
    ),
    (
        r"the archive unpacks to more than " + _N + r" bytes",
        N_("the archive unpacks to more than {n} bytes"),
    ),
    (
        r"this package was formed at (?P<a>.+?), before a package formed at (?P<b>.+?) already "
        r"staged \(version (?P<v>\d+)\): an older package never overwrites a newer one; "
        r"nothing staged\. Sending this file again changes nothing: export the current prices "
        r"from 1C again \(a new file, formed now\)",
        N_(
            "this package was formed at {a}, before a package formed at {b} already staged "
            "(version {v}): an older package never overwrites a newer one; nothing staged. "
            "Sending this file again changes nothing: export the current prices from 1C again "
            "(a new file, formed now)"
        ),
    ),
    (  # the same refusal as recorded before 2026-12 (kept in cml_exchanges' history)
        r"this package was formed at (?P<a>.+?), before a package formed at (?P<b>.+?) already "
        r"staged \(version (?P<v>\d+)\): an older package never overwrites a newer one; "
        r"nothing staged\. Run the exchange again to send the current prices",
        N_(
            "this package was formed at {a}, before a package formed at {b} already staged "
            "(version {v}): an older package never overwrites a newer one; nothing staged. Run "
            "the exchange again to send the current prices"
        ),
    ),
    (_F + r" is not a zip archive: (?P<e>.*)", N_("{f} is not a zip archive: {e}")),
    (
        _F + r" holds the file (?P<m>.+) twice \(names compared without case\): not unpacked",
        N_("{f} holds the file {m} twice (names compared without case): not unpacked"),
    ),
    (
        _F + r" holds more than " + _N + r" files: not unpacked",
        N_("{f} holds more than {n} files: not unpacked"),
    ),
    (
        _F + r"'s list of files is larger than " + _N + r" bytes: not unpacked",
        N_("{f}'s list of files is larger than {n} bytes: not unpacked"),
    ),
    (
        _F + r" is damaged: its data does not unpack",
        N_("{f} is damaged: its data does not unpack"),
    ),
    (
        _F + r" is damaged: its list of files lies past its end",
        N_("{f} is damaged: its list of files lies past its end"),
    ),
    (
        _F + r" holds a file name that is not valid UTF-8",
        N_("{f} holds a file name that is not valid UTF-8"),
    ),
)
_ONEC_PARTS: tuple[tuple[str, str], ...] = (
    (
        _N + r" prices staged from (?P<m>\d+) offers",
        N_("{n} prices staged from {m} offers"),
    ),
    (
        _N + r" of unmapped price types not sent \((?P<names>.*)\)",
        N_("{n} of unmapped price types not sent ({names})"),
    ),
    (
        _N + r" not sent: not of the base unit \((?P<why>.*)\)",
        N_("{n} not sent: not of the base unit ({why})"),
    ),
    (
        _N + r" offers without prices: nothing to send",
        N_("{n} offers without prices: nothing to send"),
    ),
    (
        _N + r" offers without an article: their (?P<m>\d+) prices not sent \(quarantined\)",
        N_("{n} offers without an article: their {m} prices not sent (quarantined)"),
    ),
    (
        _N + r" offers with more than (?P<m>\d+) prices not sent \(invalid-contract\)",
        N_("{n} offers with more than {m} prices not sent (invalid-contract)"),
    ),
    (
        _N + r" prices not sent: the offer's id or article is longer than (?P<m>\d+) "
        r"characters \(invalid-contract\)",
        N_(
            "{n} prices not sent: the offer's id or article is longer than {m} characters "
            "(invalid-contract)"
        ),
    ),
    (
        _N + r" prices repeated in the package not sent: a later offer maps to the same "
        r"aggregate \(invalid-contract\)",
        N_(
            "{n} prices repeated in the package not sent: a later offer maps to the same "
            "aggregate (invalid-contract)"
        ),
    ),
    (
        _N + r" prices not sent: an unknown currency or a price that is not a decimal "
        r"\(invalid-contract\)",
        N_(
            "{n} prices not sent: an unknown currency or a price that is not a decimal "
            "(invalid-contract)"
        ),
    ),
    (
        _N + r" prices not sent: their sku and price type belong to another aggregate "
        r"\(invalid-contract\)",
        N_(
            "{n} prices not sent: their sku and price type belong to another aggregate "
            "(invalid-contract)"
        ),
    ),
)
_ONEC_WHOLE_RE = tuple((re.compile(p, re.DOTALL), ru) for p, ru in _ONEC_WHOLE)
_ONEC_PARTS_RE = tuple((re.compile(p, re.DOTALL), ru) for p, ru in _ONEC_PARTS)


def onec_words(text: str) -> str:
    """A text of the service as 1C's administrator reads it, in Russian (contract 9a); a text
    no pattern knows is kept as it is (a failure is still told, never hidden)."""
    for pattern, message in _ONEC_WHOLE_RE:
        found = pattern.fullmatch(text)
        if found:
            return _(message, "ru").format(**found.groupdict())
    parts = text.split("; ")
    said = []
    for part in parts:
        for pattern, message in _ONEC_PARTS_RE:
            found = pattern.fullmatch(part)
            if found:
                said.append(_(message, "ru").format(**found.groupdict()))
                break
        else:
            said.append(part)
    return "; ".join(said) + ("." if said != parts else "")


# The dashboard's freshness, backlog, pace card and chart, and the export page (issue 24
# items 8–12, issue 23 item 5).
_WORD_MESSAGES.update(
    {
        "chart_delivered": N_("delivered"),
        "chart_failed": N_("failed attempts"),
        "drawn_at": N_("As of {when}"),
        "refresh_every": N_("redraws itself every {seconds} s"),
        "refresh_stop": N_("Stop redrawing"),
        "refresh_off": N_("does not redraw itself"),
        "refresh_start": N_("Redraw every {seconds} s"),
        "backlog": N_("Still to deliver"),
        "backlog_eta": N_("about {eta} at the current pace"),
        "backlog_due": N_("about {eta}: the last of them is due then"),
        # a bound (``ops.backlog.estimate_kind``): a good WB may still apply an upload of
        "backlog_hold": N_("up to {eta} (waiting to learn whether WB applied the upload)"),
        "backlog_none": N_("nothing waits"),
        # review words35b item 2: a price no pace sends, only an operator's decision
        "backlog_person": N_(
            "waiting for an operator's decision on the main price in quarantine: {count} "
            "(no estimate: none goes before it)"
        ),
        "backlog_untaken": N_("not taken from 1C yet: {count}"),
        "backlog_no_pace": N_("nothing delivered in the last minute: no estimate"),
        "backlog_no_worker": N_("no worker is live: no estimate"),
        "backlog_untaken_channels": N_(
            "all on channels no worker takes now, paused or not configured ({channels}): "
            "no estimate"
        ),
        "backlog_paused": N_("delivery is paused: no estimate"),
        "backlog_unreachable": N_("the site does not answer: no estimate"),
        "backlog_channels_unreachable": N_("no channel answers: no estimate"),
        "pace_card": N_("Site's pace"),
        "pace_limit": N_(
            "limit: {limit} of {max_limit} concurrent requests, {in_flight} in flight"
        ),
        # The two figures of the tile (the new operator's review: «123 запроса/с … снижен до
        # 148 запросов/с»): what the site accepted over the last seconds, and the most the
        # workers send (``Pace.effective_rate``: lowered after the site's refusals, or
        # EXCHANGE_SITE_MAX_RATE), which the observed rate may stay below.
        "pace_accepted": N_("what the site accepted per second over the last seconds"),
        "pace_paced": N_("pace limit: at most {rate}"),
        "pace_refused": N_("refused by the site in the last minute: {refused}"),
        "pace_none": N_("no live worker has reported it"),
        "export_title": N_("Export the quarantine"),
        "export_says": N_(
            "Exports the quarantined messages: the operators' report, each entry with its reason, "
            "attempts, last error and what to do next. Without a filter: the whole quarantine."
        ),
        "export_count": N_("In quarantine now: {count}"),
        "superseded_only": N_("only superseded (a newer version was delivered)"),
        "export_these": N_("Export these entries"),
        "date_hint": N_("a date or a date and time, e.g. 2026-11-30 or 2026-11-30 08:00"),
    }
)


# A POST the workbench cannot take (the fresh review: a stale tab answered in bare English).
_WORD_MESSAGES.update(
    {
        "session_ended": N_(
            "The session has ended (signed out or expired): sign in again and repeat."
        ),
        "login_forged": N_(
            "This sign-in form is stale or was sent from another site: nobody was signed in. "
            "Enter the name and password here again."
        ),
        "bad_text": N_(
            "The request holds characters that cannot be stored or searched (a NUL byte or bytes "
            "that are not UTF-8): remove them and repeat."
        ),
        "form_stale": N_(
            "This form is stale (signed out or in again in another tab): open the page again and "
            "repeat."
        ),
    }
)


# The channels on the dashboard and the message page (contract 13, issue 31 step 7).
_WORD_MESSAGES.update(
    {
        "channels": N_("Channels"),
        "channel": N_("Channel"),
        "channel_target": N_("Target"),
        "channel_delivery": N_("Delivery"),
        "channel_live": N_("live"),
        "channel_paused": N_("paused"),
        "channel_down": N_("down: it keeps failing"),
        "channel_no_worker": N_("no live worker"),
        "channel_not_configured": N_("not configured"),
        "channel_dropped": N_("dropped"),
        "channel_backlog": N_("Still to deliver"),
        "channel_withheld": N_("Withheld"),
        "channel_quarantined": N_("In quarantine"),
        "on_channels": N_("On each channel"),
        "acts_on_channels": N_("Acts on the channels where it is quarantined: {channels}"),
        "releases_on_channels": N_("Withheld on: {channels}; the release asks the channel chosen"),
        "preview_on_channel": N_("on channel {channel}: {count}"),
        "preview_records": N_("rows refused at intake (no channel's): {count}"),
        "any_channel": N_("every channel"),
        # A cancel's consequence with several channels: it stops where it is quarantined,
        # counted above, not "the site".
        "cancel_never_sent_one_channels": N_(
            "This version will never be sent to the channels counted above. The message stays "
            "in the history."
        ),
        "cancel_never_sent_many_channels": N_(
            "These versions will never be sent to the channels counted above. The messages stay "
            "in the history."
        ),
        "cancel_behind_channels": N_(
            "Waiting behind them: {count}. After this they go to those channels without the ones "
            "stopped."
        ),
        "cancel_behind_one_channels": N_(
            "Waiting behind it: {count}. After this they go to that channel without the one "
            "stopped."
        ),
        # The workers' table and the pace card with EXCHANGE_CHANNELS: each row is a channel's
        # loop (``<worker id>/<channel>``), and what answers is that channel, not "the site".
        "breaker_channels": N_("Channel answers"),
        "site_pace_channels": N_("Channel's pace and limit"),
        "waits_for_channel": N_("waits for the channel to answer"),
        "pace_card_channels": N_("Pace of every channel"),
        "pace_accepted_channels": N_("what the channels accepted per second over the last seconds"),
        "pace_refused_channels": N_("refused by the channels in the last minute: {refused}"),
        # The pause per channel (contract 13: ``exchange pause --channel``): each row pauses
        # or resumes its own channel, the banner every channel.
        "channel_pause": N_("Pause"),
        "pause_channel": N_("Pause channel {channel}"),
        "resume_channel": N_("Resume channel {channel}"),
        "pause_all": N_("Pause every channel"),
        "resume_all": N_("Resume every channel"),
        "pause_all_hint": N_(
            "Every channel's workers stop sending within one cycle; a channel's row pauses that "
            "channel alone."
        ),
        "paused_channels": N_("Paused on their own: {channels}"),
        "channel_paused_with_all": N_("paused with every channel"),
    }
)
