"""What a 1C-Bitrix ``failure`` says, judged by the exchange component's own messages (contract
10), never by fragments of words.

The texts are those of the ``catalog.import.1c`` component, as its language files ship them:

- Russian: ``bitrix/modules/catalog/install/components/bitrix/catalog.import.1c/lang/ru/
  component.php`` (as installed, e.g. repository Dev-tester/TechStore);
- English: ``modules/catalog/install/components/bitrix/catalog.import.1c/lang/en/component.php``
  (repository avshatalov48/bitrix-core-business).

Where each is said: ``component.php`` of the same component (checkauth, the security checks,
``init``, ``file``, the zip and the step-by-step ``import``). The component answers in
windows-1251 whatever the site's charset (it converts its output before ``echo``). A message
with ``#FILE_NAME#`` names the file there; the metadata error is followed by the import's own
details. Anything else (an element's error from the information block module, a text this
table does not know) is the element's: the package is split until the SKU stands alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    LOST_SESSION = "lost-session"  # sign in again (checkauth) and send the package again, once
    CONFIGURATION = "configuration"  # the site's setup: delivery pauses
    SITE = "site"  # the site's temporary trouble, for every package alike: not charged
    ELEMENT = "element"  # about what the package holds: split until the SKU stands alone


@dataclass(frozen=True, slots=True)
class Message:
    key: str
    kind: Kind
    ru: str
    en: str


MESSAGES: tuple[Message, ...] = (
    # component.php: "Security checks": a request without the session's sessid, or not signed in.
    Message(
        "CC_BSC1_ERROR_SOURCE_CHECK",
        Kind.LOST_SESSION,
        "Ошибка проверки источника запроса. Обновите модуль обмена или отключите проверку в "
        "настройках компонента.",
        "Error checking the request source. Please update the exchange module or disable check "
        "in the component parameters.",
    ),
    Message(
        "CC_BSC1_ERROR_AUTHORIZE",
        Kind.LOST_SESSION,
        "Ошибка авторизации. Неверное имя пользователя или пароль.",
        "Authorisation error: incorrect login or password.",
    ),
    # The user's groups, the iblock module, checkauth's session and clock checks: the setup.
    Message(
        "CC_BSC1_PERMISSION_DENIED",
        Kind.CONFIGURATION,
        "У Вас нет прав для импорта каталога. Проверьте настройки компонента импорта.",
        "You do not have enough permissions to import the catalog. Please check the import "
        "component settings.",
    ),
    Message(
        "CC_BSC1_ERROR_MODULE",
        Kind.CONFIGURATION,
        "Модуль Информационных блоков не установлен.",
        "The Information Blocks module is not installed.",
    ),
    Message(
        "CC_BSC1_ERROR_SESSION_ID_CHANGE",
        Kind.CONFIGURATION,
        "Включена смена идентификатора сессий. В файле подключения компонента обмена, до "
        "подключения пролога определите константу BX_SESSION_ID_CHANGE: "
        "define('BX_SESSION_ID_CHANGE', false);",
        "Session ID change is active. Edit a file in which the exchange component is included "
        "and define the BX_SESSION_ID_CHANGE constant prior to including the prolog code: "
        "define('BX_SESSION_ID_CHANGE', false);",
    ),
    Message(
        "CC_BSC1_ERROR_DATABASE_SERVER_TIME",
        Kind.CONFIGURATION,
        "Время на сервере базы данных отличается от времени на веб-сервере больше, чем на 10 "
        "минут. Вероятно неправильно настроены временные зоны. Выполните настройку и повторите "
        "обмен.",
        "The difference between the database server time and the web server time is more than "
        "10 minutes. Time zones may be out of sync. Please configure time zones and try again.",
    ),
    # The final "else" of component.php: a mode it does not take, or a file name it refused
    # (no $ABS_FILE_NAME); every package would meet it alike.
    Message(
        "CC_BSC1_ERROR_UNKNOWN_COMMAND",
        Kind.CONFIGURATION,
        "Неизвестная команда.",
        "Unknown command.",
    ),
    # ImportMetaData (step 4): the catalogue and its price types, the same for every SKU.
    Message(
        "CC_BSC1_METADATA_ERROR",
        Kind.CONFIGURATION,
        "Ошибка импорта метаданных.",
        "Error importing metadata.",
    ),
    # init, file, the zip and the temporary tables: the site's disk and database, for now.
    Message(
        "CC_BSC1_ERROR_INIT",
        Kind.SITE,
        "Ошибка инициализации временного каталога.",
        "Error trying to initialise the temporary folder.",
    ),
    Message(
        "CC_BSC1_ERROR_FILE_WRITE",
        Kind.SITE,
        "Ошибка записи в файл #FILE_NAME#.",
        "Error writing to #FILE_NAME#.",
    ),
    Message(
        "CC_BSC1_ERROR_FILE_OPEN",
        Kind.SITE,
        "Ошибка открытия файла #FILE_NAME# для записи.",
        "Error trying to open #FILE_NAME# for writing.",
    ),
    Message(
        "CC_BSC1_ERROR_HTTP_READ",
        Kind.SITE,
        "Ошибка чтения HTTP данных.",
        "Error reading HTTP data.",
    ),
    Message(
        "CC_BSC1_ZIP_ERROR",
        Kind.SITE,
        "Ошибка распаковки архива.",
        "Archive deflate error.",
    ),
    Message(
        "CC_BSC1_TABLE_CREATE_ERROR",
        Kind.SITE,
        "Ошибка создания временных таблиц.",
        "Error trying to create temporary tables.",
    ),
    Message(
        "CC_BSC1_FILE_ERROR",
        Kind.SITE,
        "Ошибка открытия файла импорта.",
        "Error trying to open the source file.",
    ),
    Message(
        "CC_BSC1_INDEX_CREATE_ERROR",
        Kind.SITE,
        "Ошибка создания индекса для временных таблиц.",
        "Error creating the index of temporary tables.",
    ),
    Message(
        "CC_BCT1_TABLE_EXIST_ERROR",
        Kind.SITE,
        "Временная таблица не существует",
        "Temporary table does not exist.",
    ),
)


def _pattern(template: str) -> re.Pattern[str]:
    """The message as it begins an answer: placeholders stand for any text, spaces for any
    run of spaces, the final full stop optional, case ignored."""
    words = template.rstrip(".").split()
    escaped = (".*?".join(re.escape(p) for p in re.split(r"#[A-Z_]+#", w)) for w in words)
    return re.compile(r"\s+".join(escaped), re.IGNORECASE)


_PATTERNS: tuple[tuple[re.Pattern[str], Message], ...] = tuple(
    (_pattern(text), message) for message in MESSAGES for text in (message.ru, message.en)
)


def recognise(text: str) -> Message | None:
    """The component's message that ``text`` (a ``failure``'s text) begins with, or None."""
    said = " ".join(text.split())
    for pattern, message in _PATTERNS:
        if pattern.match(said):
            return message
    return None
