"""EXCHANGE_DISPLAY_TZ (issue 24 item 8): people read times on the host's own clock unless the
setting names another zone; a host whose zone cannot be read, or Debian's «Etc/UTC», is UTC."""

from __future__ import annotations

import pytest
import tzlocal

from exchange.settings import host_zone, load_settings


@pytest.mark.parametrize(
    ("host", "shown"),
    [
        ("Europe/Moscow", "Europe/Moscow"),
        ("Asia/Yekaterinburg", "Asia/Yekaterinburg"),
        ("Etc/UTC", "UTC"),
        ("", "UTC"),
        ("Mars/Olympus", "UTC"),  # a name zoneinfo does not know never stops a start
    ],
)
def test_the_display_zone_defaults_to_the_hosts_zone(
    monkeypatch: pytest.MonkeyPatch, host: str, shown: str
) -> None:
    monkeypatch.setattr(tzlocal, "get_localzone_name", lambda: host)
    monkeypatch.delenv("EXCHANGE_DISPLAY_TZ", raising=False)
    assert host_zone() == shown
    assert load_settings().display_tz == shown


def test_a_host_whose_zone_cannot_be_read_shows_utc(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable() -> str:
        raise LookupError("no zone configured")

    monkeypatch.setattr(tzlocal, "get_localzone_name", unreadable)
    assert host_zone() == "UTC"


def test_exchange_display_tz_names_another_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tzlocal, "get_localzone_name", lambda: "Europe/Moscow")
    monkeypatch.setenv("EXCHANGE_DISPLAY_TZ", "Asia/Novosibirsk")
    assert load_settings().display_tz == "Asia/Novosibirsk"
