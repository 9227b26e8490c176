"""Masking hides a secret, never a piece of another word (issue 21 item 15), by one rule in
every output; and a secret the service's owner chooses is refused at start when it is short
enough to guess or to stand in ordinary text (the shop's are warned about)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from exchange.errors import ConfigurationError
from exchange.report.mask import Redactor
from exchange.settings import load_settings, mask_secrets, secret_forms


def masked(text: str, *secrets: str) -> str:
    return mask_secrets(text, [form for secret in secrets for form in secret_forms(secret)])


@pytest.mark.parametrize(
    ("secret", "text", "shown"),
    [
        ("t", "rejected", "rejected"),  # inside a word: another word, left whole
        ("t", "status: t", "status: ***"),
        ("t", "(t)", "(***)"),
        ("exchange", "/bitrix/admin/1c_exchange.php", "/bitrix/admin/1c_exchange.php"),
        ("exchange", "password exchange refused", "password *** refused"),
        ("exchange", "exchange2", "exchange2"),  # a digit beside it: part of a word
        ("s3cret-token", "Bearer s3cret-token", "Bearer ***"),
        ("s3cret-token", "token=s3cret-token&x=1", "token=***&x=1"),
        ("s3cret-token", '{"t": "s3cret-token"}', '{"t": "***"}'),
        ("s3cret-token", "xs3cret-token", "xs3cret-token"),
        ("pa55-Word!", "pw=pa55-Word!abc", "pw=***abc"),  # its edge is no letter: no word cut
        ("pa55 Word", "pa55%20Word", "***"),  # a quoted form is masked as well
        ("ключ-секрет", "ключ-секрет: нет", "***: нет"),  # letters of any script
        ("ключ", "ключи", "ключи"),
    ],
)
def test_a_secret_is_masked_only_where_it_stands_alone(secret: str, text: str, shown: str) -> None:
    assert shown == masked(text, secret)


def test_the_report_masks_by_the_same_rule() -> None:
    redactor = Redactor(secrets=["t", "exchange"])
    assert "rejected by 1c_exchange.php: ***" == redactor.text("rejected by 1c_exchange.php: t")


@pytest.mark.parametrize(
    ("setting", "variable"),
    [
        ("1c_password", "EXCHANGE_1C_PASSWORD"),
        ("intake_token", "EXCHANGE_INTAKE_TOKEN"),
        ("http_secret_key", "EXCHANGE_HTTP_SECRET_KEY"),
    ],
)
def test_a_short_secret_of_the_service_is_refused_at_start_by_name(
    setting: str, variable: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        load_settings(**{setting: "Sh0rt!7"})
    assert variable in str(refused.value) and "Sh0rt!7" not in str(refused.value)
    assert "8 characters" in str(refused.value)
    secret_file = tmp_path / "secret"
    secret_file.write_text("Sh0rt!7\n")
    with pytest.raises(ConfigurationError) as from_file:
        load_settings(**{f"{setting}_file": str(secret_file)})
    assert f"{variable}_FILE" in str(from_file.value)
    load_settings(**{setting: "L0nger!78"})  # eight characters are enough


@pytest.mark.parametrize(
    ("setting", "variable"),
    [
        ("site_token", "EXCHANGE_SITE_TOKEN"),
        ("woo_key", "EXCHANGE_WOO_KEY"),
        ("woo_secret", "EXCHANGE_WOO_SECRET"),
        ("bitrix_password", "EXCHANGE_BITRIX_PASSWORD"),
    ],
)
def test_a_short_credential_the_shop_issued_is_warned_about_by_name(
    setting: str, variable: str
) -> None:
    """Loaded (the shop chose it), and named among the short ones the command line warns
    about at start (tests/cli/test_cli_words.py: the console line), never by value."""
    settings = load_settings(**{setting: "abc"})
    assert [variable] == settings.short_secrets()
    assert [] == load_settings(**{setting: "L0nger!78"}).short_secrets()


def test_the_command_line_refuses_a_short_1c_password_in_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    env |= {
        "EXCHANGE_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}",
        "EXCHANGE_1C_USER": "1c",
        "EXCHANGE_1C_PASSWORD": "qwerty1",
    }
    result = subprocess.run(
        [sys.executable, "-m", "exchange", "migrate"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error:") and "EXCHANGE_1C_PASSWORD" in line
    assert "qwerty1" not in result.stdout + result.stderr


def test_the_workbench_message_page_masks_by_the_reports_rule() -> None:
    """The message page shows the payload as the report does: a configured sensitive field
    hidden, a secret masked where it stands alone, never inside a word."""
    from exchange.web.config import WebConfig
    from exchange.web.workbench import _masked

    def config_of(**fields: Any) -> WebConfig:
        return WebConfig(kinds={}, exchange_dir=Path("unused"), **fields)

    config = config_of(report_mask_fields=("card",), report_secrets=("t0ken-Secret-1",))
    payload = '{"card": "4111111111111111", "note": "sent with t0ken-Secret-1", "sku": "rejected"}'
    shown = _masked(payload, config)
    assert "4111111111111111" not in shown
    assert "t0ken-Secret-1" not in shown
    assert '"sku": "rejected"' in shown
    assert "rejected" in _masked('{"sku": "rejected"}', config_of(report_secrets=("t",)))
