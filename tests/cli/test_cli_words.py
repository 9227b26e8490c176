"""The command line speaks Russian under a Russian locale or ``EXCHANGE_LANG=ru`` (contract 15,
"Words"; issue 34 item 7); ``--json``, log lines and codes stay English."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from clitools import Cli, Scenario, describe

RUSSIAN = {
    "EXCHANGE_LANG=ru": {"EXCHANGE_LANG": "ru"},
    "LANG=ru_RU": {"LANG": "ru_RU.UTF-8"},
    "LC_MESSAGES=ru_RU": {"LANG": "en_US.UTF-8", "LC_MESSAGES": "ru_RU.UTF-8"},
}
ENGLISH = {
    "no locale": {},
    "EXCHANGE_LANG=en beats LANG=ru_RU": {"LANG": "ru_RU.UTF-8", "EXCHANGE_LANG": "en"},
    "LC_ALL=C beats LANG=ru_RU": {"LANG": "ru_RU.UTF-8", "LC_ALL": "C.UTF-8"},
}
SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@SQLITE_ONLY
@pytest.mark.parametrize("env", list(RUSSIAN.values()), ids=list(RUSSIAN))
def test_pause_and_resume_speak_russian_under_a_russian_locale(
    cli: Cli, db_url: str, env: dict[str, str]
) -> None:
    paused = cli("pause", "--note", "проверка", db=db_url, env=env)
    again = cli("pause", db=db_url, env=env)
    resumed = cli("resume", db=db_url, env=env)
    assert ["доставка остановлена", "доставка уже была остановлена", "доставка возобновлена"] == [
        r.stdout.strip().splitlines()[-1] for r in (paused, again, resumed)
    ], describe(resumed)


@SQLITE_ONLY
@pytest.mark.parametrize("env", list(ENGLISH.values()), ids=list(ENGLISH))
def test_the_command_line_speaks_english_otherwise(
    cli: Cli, db_url: str, env: dict[str, str]
) -> None:
    result = cli("pause", db=db_url, env=env)
    assert "delivery paused" == result.stdout.strip().splitlines()[-1], describe(result)


@SQLITE_ONLY
def test_an_error_and_a_bad_date_are_said_in_russian(cli: Cli, db_url: str) -> None:
    env = RUSSIAN["LANG=ru_RU"]
    missing = cli("quarantine", "retry", "no-such-id", "--note", "x", db=db_url, env=env)
    assert 2 == missing.returncode, describe(missing)
    assert "ошибка: нет такого сообщения: no-such-id" in missing.stderr, describe(missing)
    bad = cli("quarantine", "list", "--since", "вчера", db=db_url, env=env)
    assert 2 == bad.returncode
    assert "не дата и не время" in bad.stderr and "30.11.2026" in bad.stderr, describe(bad)


@SQLITE_ONLY
def test_quarantine_actions_say_their_count_in_russian_and_json_stays_english(
    cli: Cli, db_url: str, scenario: Scenario
) -> None:
    env = RUSSIAN["EXCHANGE_LANG=ru"]
    dry = cli("quarantine", "retry", "--reason", "http-422", "--note", "n", db=db_url, env=env)
    assert dry.returncode == 0, describe(dry)
    assert "будут повторены 2 сообщения" in dry.stdout, describe(dry)
    assert "ничего не изменено: чтобы повторить 2 сообщения, добавьте --yes" in dry.stdout
    listed = cli("quarantine", "list", "--json", db=db_url, env=env)
    reasons = {entry["reason"] for entry in json.loads(listed.stdout)}
    assert {"http-422", "invalid-contract", "unknown-kind"} == reasons  # codes, in English
    status = cli("status", "--json", db=db_url, env=env)
    document = json.loads(status.stdout)
    assert all(not any("а" <= c <= "я" for c in said) for said in document["needs_person"])
    console = cli("status", db=db_url, env=env)
    assert "требует внимания: в карантине 4 сообщения" in console.stdout, describe(console)


@SQLITE_ONLY
def test_the_quarantine_list_names_kinds_and_reasons_in_words_under_a_russian_locale(
    cli: Cli, db_url: str, scenario: Scenario
) -> None:
    russian = cli("quarantine", "list", db=db_url, env=RUSSIAN["LANG=ru_RU"])
    assert russian.returncode == 0, describe(russian)
    for said in ("карантин: 4", "Код сообщения", "причина", "финансовая проводка", "цена"):
        assert said in russian.stdout, (said, describe(russian))
    assert "сайт отклонил (http-422)" in russian.stdout
    assert "ошибка в данных (invalid-contract)" in russian.stdout
    english = cli("quarantine", "list", db=db_url)
    assert "quarantine: 4" in english.stdout and "financial_posting" in english.stdout


@SQLITE_ONLY
def test_the_quarantine_list_says_since_when_in_russian_and_leads_with_product_and_price(
    cli: Cli, db_url: str, scenario: Scenario
) -> None:
    """Under a Russian locale every row's time says «… назад» as ``status`` does, never
    "(5 min ago)"; the product and its price lead after the id, as on the workbench's list,
    the price as Russian writes it («30,00 ₽»). English keeps "ago" and its own price."""
    env = {**RUSSIAN["LANG=ru_RU"], "COLUMNS": "250"}
    russian = cli("quarantine", "list", db=db_url, env=env)
    assert russian.returncode == 0, describe(russian)
    assert " ago)" not in russian.stdout, describe(russian)
    assert russian.stdout.count(" назад)") == 4, describe(russian)
    header = next(line for line in russian.stdout.splitlines() if "Код сообщения" in line)
    cells = [cell.strip() for cell in re.split(r"[┃│|]", header) if cell.strip()]
    assert cells[:4] == ["Код сообщения", "Товар", "Цена", "вид"], header
    row = next(line for line in russian.stdout.splitlines() if scenario.sku_rejected in line)
    assert "30,00\xa0₽" in row, row
    english = cli("quarantine", "list", db=db_url, env={"COLUMNS": "250"})
    assert english.stdout.count(" ago)") == 4, describe(english)
    assert "product" in english.stdout and "price" in english.stdout


@SQLITE_ONLY
def test_a_single_message_preview_says_its_count_not_their(
    cli: Cli, db_url: str, scenario: Scenario
) -> None:
    """The preview of one message's cancel or retry says «1 сообщение», never «их»."""
    env = RUSSIAN["LANG=ru_RU"]
    for action, verb in (("cancel", "отменить"), ("retry", "повторить")):
        shown = cli(
            "quarantine", action, "--aggregate", "SKU-REJ", "--note", "n", db=db_url, env=env
        )
        assert shown.returncode == 0, describe(shown)
        assert f"ничего не изменено: чтобы {verb} 1 сообщение, добавьте --yes" in shown.stdout
        assert f"чтобы {verb} их" not in shown.stdout, describe(shown)


@SQLITE_ONLY
def test_history_says_events_states_and_details_in_russian(
    cli: Cli, db_url: str, scenario: Scenario
) -> None:
    env = RUSSIAN["EXCHANGE_LANG=ru"]
    russian = cli("history", scenario.doc1_v1, db=db_url, env=env)
    assert russian.returncode == 0, describe(russian)
    for said in (
        "финансовая проводка DOC-1 v1",
        "состояние: в карантине, причина: сайт отклонил (http-422)",
        "событие",
        "принято из 1С",
        "из строки staging_intents №",
    ):
        assert said in russian.stdout, (said, describe(russian))
    english = cli("history", scenario.doc1_v1, db=db_url)
    assert "state=quarantined reason=http-422" in english.stdout, describe(english)
    assert "from staging row #" in english.stdout


@SQLITE_ONLY
def test_prune_says_what_it_removes_in_russian_and_logs_stay_english(cli: Cli, db_url: str) -> None:
    russian = cli("prune", "--dry-run", db=db_url, env=RUSSIAN["EXCHANGE_LANG=ru"])
    assert russian.returncode == 0, describe(russian)
    assert "будет удалено (всё старше " in russian.stdout, describe(russian)
    assert "доставленных или отменённых сообщений — 0" in russian.stdout
    english = cli("prune", "--dry-run", db=db_url)
    assert "would remove 0 delivered or cancelled message(s)" in english.stdout


@SQLITE_ONLY
def test_operator_commands_speak_russian(cli: Cli, db_url: str) -> None:
    env = RUSSIAN["EXCHANGE_LANG=ru"]
    empty = cli("operator", "list", db=db_url, env=env)
    assert "операторов нет" in empty.stdout, describe(empty)
    added = cli(
        "operator", "add", "olga", "--role", "viewer", db=db_url, env=env, stdin="secret-pass\n"
    )
    assert "оператор olga (наблюдатель) сохранён" in added.stdout, describe(added)
    listed = cli("operator", "list", db=db_url, env=env)
    assert "роль" in listed.stdout and "наблюдатель" in listed.stdout, describe(listed)


# Codes and ids the console shows as they are (contract 15: codes stay English).
STATUS_CODES = re.compile(
    r"sqlite\S*|postgresql\S*|\S+\.db\b|[\w.-]*-[\w.-]*\d[\w.-]*|\([\w-]+\)|UTC|MSK|"
    r"exchange run|RabbitMQ|Redis|SKU|http-\d+|[a-z]+-[a-z-]+|\bid\b|\w*\d\w*"
)


def english_words(text: str) -> list[str]:
    rest = STATUS_CODES.sub(" ", text)
    return sorted(set(re.findall(r"[A-Za-z]{2,}", rest)))


@SQLITE_ONLY
def test_status_console_has_no_english_word_under_a_russian_locale(
    cli: Cli, db_url: str, scenario: Scenario
) -> None:
    """Issue 34 item 7: every table, caption and line of ``status`` for a person is Russian
    under LANG=ru_RU (codes and ids aside); ``--json`` keeps its English keys and causes."""
    env = RUSSIAN["LANG=ru_RU"]
    console = cli("status", db=db_url, env=env)
    assert console.returncode == 1, describe(console)
    assert "сообщения по состояниям" in console.stdout and "очередь" in console.stdout
    assert english_words(console.stdout) == [], (english_words(console.stdout), console.stdout)
    russian_json = json.loads(cli("status", "--json", db=db_url, env=env).stdout)
    english_json = json.loads(cli("status", "--json", db=db_url).stdout)
    for document in (russian_json, english_json):
        document.pop("oldest_undelivered_age_s", None)
        document.pop("intake", None)
        document.pop("quarantine_by_reason", None)
        document.pop("workers", None)
    assert russian_json == english_json  # --json unchanged by the locale
    english = cli("status", db=db_url)
    assert "messages by state" in english.stdout and "Site" in english.stdout
    assert "needs a person:" in english.stdout, describe(english)


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("status", "--bogus"), "ошибка: нет такого параметра: --bogus; справка: exchange status"),
        (("bogus",), "ошибка: нет такой команды: 'bogus'; справка: exchange --help"),
        (("status", "extra"), "ошибка: лишние аргументы: extra; справка: exchange status"),
        (("history",), "ошибка: не указан обязательный параметр 'message_id'"),
    ],
    ids=["option", "command", "extra", "missing"],
)
def test_a_mistake_on_the_command_line_is_one_russian_line_exit_2(
    cli: Cli, db_url: str, args: tuple[str, ...], said: str
) -> None:
    """Typer's own "Error: No such option …", "Usage: …" are said in Russian (issue 34 item
    7), one line on stderr, exit 2; English without a Russian locale, as before."""
    russian = cli(*args, db=db_url, env=RUSSIAN["LANG=ru_RU"])
    assert 2 == russian.returncode, describe(russian)
    assert russian.stderr.startswith(said), describe(russian)
    assert len(russian.stderr.strip().splitlines()) == 1, describe(russian)
    assert "Usage:" not in russian.stderr and "Error" not in russian.stderr
    english = cli(*args, db=db_url)
    assert 2 == english.returncode and "Error: " in english.stderr, describe(english)


def test_serve_names_its_addresses_in_russian() -> None:
    """``serve``'s lines for the person who started it (issue 34 item 7): every way in that
    ``web.server.addresses`` names has Russian words."""
    from exchange.cli.serving import _WAYS_IN
    from exchange.i18n import _
    from exchange.web.server import addresses

    where = addresses(scheme="http", host="h", port=1, public=None, onec=True, intake=True)
    assert {what for what, _address in where} == set(_WAYS_IN)
    said = [_(_WAYS_IN[what], "ru") for what, _address in where]
    assert said == ["рабочее место", "обмен с 1С", "JSON-приём"]


@SQLITE_ONLY
def test_check_names_each_check_in_russian_and_keeps_its_codes(cli: Cli, db_url: str) -> None:
    """``check`` under a Russian locale (issue 34 item 7): each check's name in Russian, the
    OK/FAIL/SKIP codes as they are (scripts look for them)."""
    russian = cli("check", db=db_url, env=RUSSIAN["LANG=ru_RU"])
    lines = russian.stdout.strip().splitlines()
    assert lines[0].startswith("OK   настройки верны: "), describe(russian)
    assert any(line.startswith("OK   база данных доступна (") for line in lines), lines
    assert any("сайт доступен и принимает токен" in line for line in lines), lines
    assert any(
        "EXCHANGE_SITE_URL не задан (без него exchange run не работает)" in line for line in lines
    )
    assert "переменные окружения и значения по умолчанию; виды " in lines[0]
    names = [re.sub(r"\([^)]*\)|\w+_\w+", "", line[5:]).split(":")[0] for line in lines]
    assert all(not re.search(r"[A-Za-z]{3,}", n) for n in names), names
    english = cli("check", db=db_url)
    assert english.stdout.startswith("OK   configuration valid: "), describe(english)


def test_no_database_is_said_in_russian(cli: Cli, tmp_path: Path) -> None:
    """The first error a new operator meets (a read command in the wrong folder) is Russian
    under a Russian locale (issue 34 item 7), with the variable to set."""
    url = f"sqlite:///{tmp_path / 'absent.db'}"
    said = cli("status", db=url, env=RUSSIAN["LANG=ru_RU"])
    assert 2 == said.returncode, describe(said)
    assert said.stderr.startswith("ошибка: нет базы данных: "), describe(said)
    assert "EXCHANGE_DATABASE_URL" in said.stderr and "exchange migrate" in said.stderr
    assert not (tmp_path / "absent.db").exists()


def test_migrate_says_what_it_did_in_russian(cli: Cli, tmp_path: Path) -> None:
    """``migrate``'s lines for a person (issue 34 item 7): the revision and how workers wake,
    Russian numbers («0,15 с»)."""
    url = f"sqlite:///{tmp_path / 'new.db'}"
    said = cli("migrate", db=url, env=RUSSIAN["LANG=ru_RU"])
    assert 0 == said.returncode, describe(said)
    first, wake = said.stdout.strip().splitlines()[-2:]
    assert first.startswith("схема sqlite:///") and " обновлена до версии " in first
    assert wake.startswith(
        "SQLite: строка, записанная в staging_intents, будит обработчики за 0,15 с"
    )
    english = cli("migrate", db=url)
    assert "to revision" in english.stdout and "within 0.15 s" in english.stdout, describe(english)


def test_a_database_not_migrated_is_said_in_russian(cli: Cli, tmp_path: Path) -> None:
    """A database file with no tables: «сначала выполните `exchange migrate`» (issue 34 item 7)."""
    (tmp_path / "empty.db").write_bytes(b"")
    said = cli("status", db=f"sqlite:///{tmp_path / 'empty.db'}", env=RUSSIAN["LANG=ru_RU"])
    assert 2 == said.returncode, describe(said)
    assert "ошибка: база данных не подготовлена: сначала выполните `exchange migrate`" in (
        said.stderr
    ), describe(said)


RUSSIAN_TIME = r"\d\d\.\d\d\.\d{4} \d\d:\d\d:\d\d MSK"


@SQLITE_ONLY
def test_find_rows_say_state_kind_price_and_time_as_russian_writes_them(
    cli: Cli, db_url: str, scenario: Scenario
) -> None:
    """Issue 34 item 7: ``find``'s row under a Russian locale has the state, the kind and the
    reason in words, the price as Russian writes it («20,00 ₽», never "price=20.00 RUB") and
    the time in the display zone as Russian writes it; the SKU and the 1C document as they
    are. English without the locale, as before."""
    env = {**RUSSIAN["LANG=ru_RU"], "EXCHANGE_DISPLAY_TZ": "Europe/Moscow"}
    russian = cli("find", "SKU-2", db=db_url, env=env)
    assert russian.returncode == 0, describe(russian)
    row = russian.stdout.strip().splitlines()[-1]
    assert row.strip().startswith("доставлено  цена SKU-2 v1  причина: —"), row
    assert "цена: 20,00\xa0₽" in row and "1С: Установка цен номенклатуры 000001" in row, row
    assert re.search(f"обновлено {RUSSIAN_TIME}$", row), row
    assert english_words(row) == [], row
    quarantined = cli("find", "SKU-REJ", db=db_url, env=env).stdout.strip().splitlines()[-1]
    assert "в карантине" in quarantined and "причина: сайт отклонил (http-422)" in quarantined
    english = cli("find", "SKU-2", db=db_url).stdout
    assert "delivered  price SKU-2 v1" in english and "price=RUB\xa020.00" in english, english


@SQLITE_ONLY
@pytest.mark.parametrize("lang", ["en", "ru"])
def test_find_and_quarantine_list_write_a_price_the_same_way(
    cli: Cli, db_url: str, scenario: Scenario, lang: str
) -> None:
    """Promise (issue 32, mpminor item 7): one way to write money in operator output
    (``words.money``): ``find`` writes a price as ``quarantine list`` and the workbench do, in
    English too (it wrote "30.00 RUB" beside the list's "RUB30.00")."""
    env = {"EXCHANGE_LANG": lang}
    shown = {"en": "RUB\xa030.00", "ru": "30,00\xa0₽"}[lang]
    listed = cli("quarantine", "list", db=db_url, env=env)
    assert shown in listed.stdout, describe(listed)
    found = cli("find", "SKU-REJ", db=db_url, env=env)
    assert shown in found.stdout, describe(found)


@SQLITE_ONLY
def test_history_says_its_times_in_the_display_zone_as_russian_writes_them(
    cli: Cli, db_url: str, scenario: Scenario
) -> None:
    """``history``'s table under a Russian locale: every time «05.12.2026 14:30:00 MSK»; and
    the rows it lists when a term finds several messages are Russian as ``find``'s are."""
    env = {**RUSSIAN["LANG=ru_RU"], "EXCHANGE_DISPLAY_TZ": "Europe/Moscow"}
    russian = cli("history", scenario.sku2, db=db_url, env=env)
    assert russian.returncode == 0, describe(russian)
    assert re.search(RUSSIAN_TIME, russian.stdout), describe(russian)
    assert not re.search(r"\d{4}-\d\d-\d\d \d\d:", russian.stdout), describe(russian)
    several = cli("history", "DOC-", db=db_url, env=env)
    assert several.returncode == 2, describe(several)
    rows = [line for line in several.stdout.splitlines() if line.startswith("    ")]
    assert rows and all("финансовая проводка DOC-" in line for line in rows), rows
    assert all(english_words(line) == [] for line in rows), rows
    assert several.stderr.startswith("ошибка: ") and latin_words(several.stderr) == [], (
        several.stderr
    )


# What an error line may show in Latin letters under a Russian locale: what the person typed
# or must type ('quoted' values, --options, `commands`), setting names, addresses and paths,
# ids and codes, product names, and the codes an option takes (kinds, roles, reasons).
ALLOWED_LATIN = re.compile(
    r"'[^']*'|\"[^\"]*\"|`[^`]*`|--[\w-]+|\bEXCHANGE_\w+(=\w+)?|\b\w+://\S+|(?<!\w)/\S+|"
    r"\bhttp-NNN\b|\bmessage_id\b|\b(price|financial_posting|viewer|operator|retry|cancel|"
    r"woocommerce|api|exchange \w+|Telegram|WooCommerce|RabbitMQ|Redis|"
    r"SQLite|PostgreSQL|JSON|IANA|UTC|Europe/Moscow|true|false|DEBUG|INFO|WARNING|ERROR)\b"
)


def latin_words(text: str) -> list[str]:
    """The Latin-only words of an error line left when what may stay English is removed."""
    from exchange.ops.find import known_reasons

    longest_first = sorted(known_reasons(), key=len, reverse=True)
    codes = re.compile("|".join(rf"\b{re.escape(code)}\b" for code in longest_first))
    return english_words(ALLOWED_LATIN.sub(" ", codes.sub(" ", text)))


@SQLITE_ONLY
def test_every_error_line_of_the_command_line_is_russian_under_a_russian_locale(
    cli: Cli, db_url: str, scenario: Scenario, tmp_path: Path
) -> None:
    """Issue 34 item 7: each error path of the CLI a person meets (OperatorError,
    ConfigurationError, DatabaseUnavailable and the commands' own) is one Russian line under a
    Russian locale, exit 2: no English tail («ошибка: no message with id …»). Ids, codes,
    setting names, options, URLs and paths stay as they are."""
    env = RUSSIAN["LANG=ru_RU"]
    (tmp_path / "a-file").write_text("not a folder")
    note = ("--note", "n")
    calls: list[tuple[tuple[str, ...], dict[str, str], str]] = [
        (("history", "no-such-id"), {}, ""),
        (("history", "DOC-"), {}, ""),
        (("quarantine", "list", "--reason", "bogus"), {}, ""),
        (("quarantine", "list", "--kind", "bogus"), {}, ""),
        (("quarantine", "retry", *note), {}, ""),
        (("quarantine", "retry", "x", "--reason", "http-422", *note), {}, ""),
        (("quarantine", "retry", "no-such-id", *note), {}, ""),
        (("quarantine", "retry", scenario.sku2, *note), {}, ""),
        (("quarantine", "cancel", scenario.sku_rejected, "--note", ""), {}, ""),
        (("quarantine", "export", "--output", str(tmp_path / "a-file" / "x.csv")), {}, ""),
        (("prioritize", "nothing-like-it", *note), {}, ""),
        (("prioritize", scenario.sku2, *note), {}, ""),
        (("prioritize", scenario.sku2, "--note", ""), {}, ""),
        (("operator", "add", "two words"), {}, "long-enough-pass\n"),
        (("operator", "add", "olga", "--role", "boss"), {}, "long-enough-pass\n"),
        (("operator", "add", "olga"), {}, "short\n"),
        (("operator", "remove", "nobody"), {}, ""),
        (("notify",), {}, ""),
        (("verify",), {}, ""),
        (("verify", "--sample", "1", "--sku", "SKU-1"), {}, ""),
        (("status",), {"EXCHANGE_MAX_ATTEMPTS": "many"}, ""),
        (("status",), {"EXCHANGE_MAX_ATTEMPTS": "0"}, ""),
        (("status",), {"EXCHANGE_DISPLAY_TZ": "Mars/Base"}, ""),
        (("status",), {"EXCHANGE_TARGET": "carrier-pigeon"}, ""),
        (("status",), {"EXCHANGE_LOG_LEVEL": "LOUD"}, ""),
        (("status",), {"EXCHANGE_CONFIG": str(tmp_path / "absent.toml")}, ""),
    ]
    english = []
    for args, extra, stdin in calls:
        said = cli(*args, db=db_url, env={**env, **extra}, stdin=stdin)
        line = said.stderr.strip()
        if said.returncode != 2 or not line.startswith("ошибка: ") or len(line.splitlines()) > 1:
            english.append((args, ["not one error line, exit 2"], describe(said)))
        elif latin_words(line):
            english.append((args, latin_words(line), line))
    assert [] == english, "\n".join(map(str, english))


@SQLITE_ONLY
def test_a_settings_error_names_its_variable_and_says_the_problem_in_russian(
    cli: Cli, db_url: str
) -> None:
    """The settings' validation errors (pydantic's, turned into one line) under a Russian
    locale: the variable's name as it is, the problem in Russian; English otherwise."""
    env = {**RUSSIAN["LANG=ru_RU"], "EXCHANGE_MAX_ATTEMPTS": "many"}
    russian = cli("status", db=db_url, env=env)
    assert russian.stderr.strip() == (
        "ошибка: ошибка в настройках: EXCHANGE_MAX_ATTEMPTS: должно быть целым числом"
    ), describe(russian)
    chosen = cli(
        "status",
        db=db_url,
        env={**env, "EXCHANGE_MAX_ATTEMPTS": "3", "EXCHANGE_TARGET": "carrier-pigeon"},
    )
    assert (
        "ошибка в настройках: EXCHANGE_TARGET: допустимые значения: 'api', " in (chosen.stderr)
        and "' или '" in chosen.stderr
    ), describe(chosen)
    english = cli("status", db=db_url, env={"EXCHANGE_MAX_ATTEMPTS": "many"})
    assert "invalid configuration: EXCHANGE_MAX_ATTEMPTS: Input should be a valid integer" in (
        english.stderr
    ), describe(english)


PYDANTIC_PROBLEMS = [
    # (a setting of a channel or of the environment, its value, the Russian problem)
    ("http_timeout", 0, "http_timeout: должно быть больше 0"),
    ("batch_size", "x", "batch_size: должно быть целым числом"),
    ("site_allow_http", "maybe", "site_allow_http: должно быть true или false"),
    ("max_attempts", 1.5, "max_attempts: должно быть целым числом"),
    ("breaker_threshold", 0, "breaker_threshold: должно быть не меньше 1"),
]


@SQLITE_ONLY
def test_pydantics_own_errors_of_a_channels_setting_are_russian_and_name_the_setting(
    cli: Cli, db_url: str
) -> None:
    """Words item 7: pydantic's own validation errors of a channel's settings (greater_than,
    int_parsing, bool_parsing, int_from_float, …) printed in English inside «канал shop: …»
    under EXCHANGE_LANG=ru; they are said in Russian, each by its key in the channel, on one
    line, exit 2. So are string_pattern_mismatch and a validator's Client-Id words."""
    import json

    channel = {"target": "api", "site_url": "https://x.example", "site_token_file": "/etc/hosts"}
    for key, value, said in PYDANTIC_PROBLEMS:
        env = {
            "EXCHANGE_LANG": "ru",
            "EXCHANGE_CHANNELS": json.dumps({"shop": {**channel, key: value}}),
            "EXCHANGE_SITE_TOKEN": None,  # the runner's one-target token, refused beside them
        }
        result = cli("status", db=db_url, env=env)
        assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, describe(result)
        line = result.stderr.strip()
        assert "EXCHANGE_CHANNELS: канал shop: " + said in line, describe(result)
        assert "Input" not in line and "should" not in line, describe(result)
    for env, said in (
        ({"EXCHANGE_CURRENCY": "R"}, "EXCHANGE_CURRENCY: не соответствует образцу"),
        (
            {"EXCHANGE_TARGET": "ozon", "EXCHANGE_OZON_CLIENT_ID": "x"},
            "EXCHANGE_OZON_CLIENT_ID: должно быть Client-Id продавца",
        ),
    ):
        result = cli("status", db=db_url, env={"EXCHANGE_LANG": "ru", **env})
        assert result.returncode == 2 and said in result.stderr, describe(result)
        assert "should" not in result.stderr and "must" not in result.stderr, describe(result)


@SQLITE_ONLY
def test_the_short_secret_warning_is_a_console_message_in_the_persons_language(
    cli: Cli, db_url: str
) -> None:
    """The warning about a short shop credential is said to the person at the console before
    the log is even set up (a configuration's problem, like the error line): Russian under a
    Russian locale, the variable named, never the value; English otherwise."""
    env = {"EXCHANGE_SITE_TOKEN": "shortk"}
    russian = cli("pause", db=db_url, env={**env, **RUSSIAN["LANG=ru_RU"]})
    assert russian.returncode == 0, describe(russian)
    assert (
        "предупреждение: EXCHANGE_SITE_TOKEN короче 8 символов: попросите у магазина более "
        "длинный" in russian.stderr
    ), describe(russian)
    assert "shortk" not in russian.stderr and latin_words(russian.stderr) == []
    english = cli("pause", db=db_url, env=env)
    assert (
        "warning: EXCHANGE_SITE_TOKEN is shorter than 8 characters: ask the shop for a longer one"
        in english.stderr
    ), describe(english)


@SQLITE_ONLY
def test_prioritize_says_what_goes_first_in_russian(
    cli: Cli, db_url: str, scenario: Scenario
) -> None:
    """``prioritize``'s line for each message put first is Russian under a Russian locale, the
    id as it is."""
    said = cli(
        "prioritize", scenario.doc1_v2, "--note", "срочно", db=db_url, env=RUSSIAN["LANG=ru_RU"]
    )
    assert said.returncode == 0, describe(said)
    assert f"первым в очереди: {scenario.doc1_v2}" in said.stdout, describe(said)


@SQLITE_ONLY
def test_a_bulk_action_with_nothing_chosen_says_in_console_words_what_to_give(
    cli: Cli, db_url: str
) -> None:
    """`quarantine retry` with neither ids nor a filter: the console's words (ids or a filter
    such as --reason), lower case after «ошибка:», never the workbench's «отметьте в списке»."""
    for action in ("retry", "cancel"):
        said = cli("quarantine", action, "--note", "x", db=db_url, env=RUSSIAN["LANG=ru_RU"])
        assert 2 == said.returncode, describe(said)
        line = said.stderr.strip()
        assert line.startswith("ошибка: не выбрано ни одного сообщения: укажите их коды"), line
        assert "--reason" in line and "отметьте" not in line and "списке" not in line, line
        english = cli("quarantine", action, "--note", "x", db=db_url)
        assert f"or give the ids of the messages to {action}" in english.stderr, describe(english)
        assert "--reason" in english.stderr, describe(english)
