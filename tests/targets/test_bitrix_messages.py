"""How the Bitrix target judges a ``failure`` and a lost session (contract 10), against what the
1C-Bitrix component says.

The texts below are copied from the ``catalog.import.1c`` component's language files, not from
the target: ``lang/ru/component.php`` (as installed: repository Dev-tester/TechStore,
bitrix/modules/catalog/install/components/bitrix/catalog.import.1c/lang/ru/component.php) and
``lang/en/component.php`` (repository avshatalov48/bitrix-core-business,
modules/catalog/install/components/bitrix/catalog.import.1c/lang/en/component.php).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from conformance import price

from exchange.dev.bitrixsim import PATH, BitrixSimulator
from exchange.domain.reasons import Reason
from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.bitrix.target import LOST_SESSION, BitrixTarget, classify_failure

LOST, PAUSE, SITE, SPLIT = "lost session", "pause", "site-wide temporary", "split"

# (key, Russian, English, what it means after checkauth)
COMPONENT_TEXTS = [
    (
        "CC_BSC1_ERROR_SOURCE_CHECK",
        "Ошибка проверки источника запроса. Обновите модуль обмена или отключите проверку в "
        "настройках компонента.",
        "Error checking the request source. Please update the exchange module or disable check "
        "in the component parameters.",
        LOST,
    ),
    (
        "CC_BSC1_ERROR_AUTHORIZE",
        "Ошибка авторизации. Неверное имя пользователя или пароль.",
        "Authorisation error: incorrect login or password.",
        LOST,
    ),
    (
        "CC_BSC1_PERMISSION_DENIED",
        "У Вас нет прав для импорта каталога. Проверьте настройки компонента импорта.",
        "You do not have enough permissions to import the catalog. Please check the import "
        "component settings.",
        PAUSE,
    ),
    (
        "CC_BSC1_ERROR_MODULE",
        "Модуль Информационных блоков не установлен.",
        "The Information Blocks module is not installed.",
        PAUSE,
    ),
    (
        "CC_BSC1_ERROR_SESSION_ID_CHANGE",
        "Включена смена идентификатора сессий. В файле подключения компонента обмена, до "
        "подключения пролога определите константу BX_SESSION_ID_CHANGE: "
        "define('BX_SESSION_ID_CHANGE', false);",
        "Session ID change is active. Edit a file in which the exchange component is included "
        "and define the BX_SESSION_ID_CHANGE constant prior to including the prolog code: "
        "define('BX_SESSION_ID_CHANGE', false);",
        PAUSE,
    ),
    (
        "CC_BSC1_ERROR_DATABASE_SERVER_TIME",
        "Время на сервере базы данных отличается от времени на веб-сервере больше, чем на 10 "
        "минут. Вероятно неправильно настроены временные зоны. Выполните настройку и повторите "
        "обмен.",
        "The difference between the database server time and the web server time is more than "
        "10 minutes. Time zones may be out of sync. Please configure time zones and try again.",
        PAUSE,
    ),
    (
        "CC_BSC1_ERROR_INIT",
        "Ошибка инициализации временного каталога.",
        "Error trying to initialise the temporary folder.",
        SITE,
    ),
    (
        "CC_BSC1_ERROR_FILE_WRITE",
        "Ошибка записи в файл /1c_catalog/offers.xml.",
        "Error writing to /1c_catalog/offers.xml.",
        SITE,
    ),
    (
        "CC_BSC1_ERROR_FILE_OPEN",
        "Ошибка открытия файла /1c_catalog/offers.xml для записи.",
        "Error trying to open /1c_catalog/offers.xml for writing.",
        SITE,
    ),
    (
        "CC_BSC1_ERROR_HTTP_READ",
        "Ошибка чтения HTTP данных.",
        "Error reading HTTP data.",
        SITE,
    ),
    ("CC_BSC1_ZIP_ERROR", "Ошибка распаковки архива.", "Archive deflate error.", SITE),
    (
        "CC_BSC1_TABLE_CREATE_ERROR",
        "Ошибка создания временных таблиц.",
        "Error trying to create temporary tables.",
        SITE,
    ),
    (
        "CC_BSC1_INDEX_CREATE_ERROR",
        "Ошибка создания индекса для временных таблиц.",
        "Error creating the index of temporary tables.",
        SITE,
    ),
    (
        "CC_BSC1_FILE_ERROR",
        "Ошибка открытия файла импорта.",
        "Error trying to open the source file.",
        SITE,
    ),
    (
        "CC_BCT1_TABLE_EXIST_ERROR",
        "Временная таблица не существует",
        "Temporary table does not exist.",
        SITE,
    ),
]

# Texts that are none of the component's: an element's error, or words that merely contain
# fragments the target once judged by («прав» in «Неправильный», «каталог», «доступ»).
NOT_THE_COMPONENTS = [
    "Неправильный формат цены в предложении SKU-3",
    "Элемент SKU-3: нет доступа к свойству Каталог",
    "Ошибка в предложении SKU-3: неверная цена",
    "",
]


def meaning(answer: Classification) -> str:
    if answer.error_class == LOST_SESSION:
        return LOST
    if answer.verdict is Verdict.PAUSE:
        return PAUSE
    if answer.verdict is Verdict.TEMPORARY and answer.site_wide:
        return SITE
    if answer.verdict is Verdict.TERMINAL and answer.reason == Reason.SHOP_FAILURE:
        return SPLIT
    return f"{answer.verdict} ({answer.error_class})"


@pytest.mark.parametrize(
    ("text", "expected"),
    [pytest.param(ru, want, id=f"{key}-ru") for key, ru, _, want in COMPONENT_TEXTS]
    + [pytest.param(en, want, id=f"{key}-en") for key, _, en, want in COMPONENT_TEXTS]
    + [pytest.param(text, SPLIT, id=f"other-{n}") for n, text in enumerate(NOT_THE_COMPONENTS)],
)
def test_a_failure_is_judged_by_the_components_own_messages_and_shows_the_sites_words(
    text: str, expected: str
) -> None:
    answer = classify_failure(text, "import")
    assert expected == meaning(answer)
    assert text.strip() in answer.detail


@pytest.mark.parametrize("text", [ru for _, ru, _, _ in COMPONENT_TEXTS[:6]])
def test_any_failure_at_checkauth_pauses_delivery(text: str) -> None:
    assert Verdict.PAUSE == classify_failure(text, "checkauth").verdict


# -- a lost session --------------------------------------------------------------------------


@pytest.fixture
def site() -> Iterator[BitrixSimulator]:
    simulator = BitrixSimulator("u", "p", step_size=100)
    simulator.start()
    yield simulator
    simulator.stop()


def send(site: BitrixSimulator, *skus: str) -> list[Classification]:
    target = BitrixTarget(
        site.url + PATH,
        "u",
        lambda: "p",
        catalog_id="c",
        price_types={"retail": "Розничная"},
        max_import_steps=20,
        timeout=2.0,
    )

    async def go() -> list[Classification]:
        try:
            return await target.send([price(sku, 1) for sku in skus])
        finally:
            await target.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("lost_as", ["message", "redirect", "form"])
def test_a_session_lost_at_import_means_one_new_checkauth_and_the_package_sent_again(
    site: BitrixSimulator, lost_as: str
) -> None:
    site.faults.lose_session, site.faults.session_lost_as = 1, lost_as

    answers = send(site, "SKU-1", "SKU-2")

    assert [Verdict.DELIVERED, Verdict.DELIVERED] == [a.verdict for a in answers]
    assert ("1.00", "1.00") == (site.price("SKU-1"), site.price("SKU-2"))
    assert 2 == site.requests["checkauth"]


@pytest.mark.parametrize("lost_as", ["message", "redirect", "form"])
def test_a_session_lost_twice_for_one_package_is_a_configuration_verdict_that_says_so(
    site: BitrixSimulator, lost_as: str
) -> None:
    site.faults.lose_session, site.faults.session_lost_as = 2, lost_as

    answers = send(site, "SKU-1", "SKU-2")

    assert [Verdict.PAUSE, Verdict.PAUSE] == [a.verdict for a in answers]
    assert "lost the session twice" in answers[0].detail
    assert 2 == site.requests["checkauth"], "no loop: one new checkauth, no more"


def test_the_simulator_answers_the_components_words_in_windows_1251(
    site: BitrixSimulator,
) -> None:
    answer = httpx.get(
        f"{site.url}{PATH}", params={"type": "catalog", "mode": "checkauth"}, auth=("u", "x")
    )
    assert "text/html; charset=windows-1251" == answer.headers["Content-Type"]
    assert (
        "failure\nОшибка авторизации. Неверное имя пользователя или пароль."
        == answer.content.decode("windows-1251")
    )
