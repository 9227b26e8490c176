"""``exchange serve`` killed by SIGKILL leaves no CommerceML reader running (issue 33 item 12,
issue 34 item 11): its reading processes ended only when serve shut them down, so a serve
killed (``kill -9``, the memory killer) left them behind, holding memory and files, one of them
reading on. Each reader watches its parent's sentinel (``reading._end_with_parent``) and ends
with it. A real serve, a real 1C upload large enough that the import is still reading when
serve is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from exchange.dev.dbkit import sqlite_copy
from exchange.dev.onec_client import OneCClient

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

USER, PASSWORD = "1c-node", "pa55-Word!"
OFFERS = 60_000  # ~23 MB: read for seconds, longer than the import's 2 s before «progress»
HEAD = (
    '\ufeff<?xml version="1.0" encoding="UTF-8"?>'
    '<КоммерческаяИнформация xmlns="urn:1C.ru:commerceml_2" ВерсияСхемы="2.07" '
    'ДатаФормирования="2026-12-01T10:00:00"><ПакетПредложений СодержитТолькоИзменения="true">'
    "<Ид>package#</Ид><Наименование>Пакет предложений</Наименование><ТипыЦен><ТипЦены>"
    "<Ид>t-retail</Ид><Наименование>Розничная</Наименование><Валюта>руб</Валюта></ТипЦены>"
    "</ТипыЦен><Предложения>"
)
OFFER = (
    "<Предложение><Ид>offer-{n}</Ид><Наименование>Товар {n}</Наименование><Цены><Цена>"
    "<Представление>{n}.00 за шт</Представление><ИдТипаЦены>t-retail</ИдТипаЦены>"
    "<ЦенаЗаЕдиницу>{n}.00</ЦенаЗаЕдиницу><Валюта>руб</Валюта></Цена></Цены></Предложение>"
)
TAIL = "</Предложения></ПакетПредложений></КоммерческаяИнформация>\n"


def _large_offers() -> bytes:
    return (HEAD + "".join(OFFER.format(n=n) for n in range(OFFERS)) + TAIL).encode("utf-8")


def _stat(pid: int) -> tuple[int, str, str] | None:
    """(parent pid, state, start time) of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), fields[0], fields[19]


def _children(pid: int) -> dict[int, str]:
    """The running children of ``pid`` with their start times."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[0] == pid and stat[1] != "Z":
                found[int(entry)] = stat[2]
    return found


def _alive(pid: int, started: str) -> bool:
    """Still running, and the same process (a pid is not reused under the test)."""
    stat = _stat(pid)
    return stat is not None and stat[1] != "Z" and stat[2] == started


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_serve_killed_by_sigkill_leaves_no_reader_running(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")},
        "EXCHANGE_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}",
        "EXCHANGE_HTTP_PORT": "0",
        "EXCHANGE_1C_USER": USER,
        "EXCHANGE_1C_PASSWORD": PASSWORD,
        "EXCHANGE_1C_DIR": str(tmp_path / "1c"),
        "EXCHANGE_1C_PRICE_TYPES": '{"Розничная": "retail"}',
        "EXCHANGE_1C_READER_PROCESSES": "1",
    }
    command = [sys.executable, "-m", "exchange"]
    sqlite_copy(tmp_path / "x.db")  # migrated (a copy: `exchange migrate` has tests of its own)
    data = _large_offers()
    serve = subprocess.Popen(
        [*command, "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    readers: dict[int, str] = {}
    try:
        base = None
        deadline = time.monotonic() + 60
        while base is None and time.monotonic() < deadline:
            line = serve.stdout.readline() if serve.stdout else ""
            if line.startswith("workbench:"):
                base = line.split()[1].rstrip("/")
        assert base is not None, "serve printed no address"
        onec = OneCClient(base, USER, PASSWORD, use_zip=False)
        try:
            assert onec.checkauth().status == "success"
            onec.init()
            assert onec.upload("offers.xml", data).status == "success"
            answer = onec.read(onec._request("GET", "import", filename="offers.xml"))
            # «progress»: the reader is still reading. On a loaded machine the import may end
            # within its first request; the pooled reader then waits for the next file, and
            # must end with serve all the same.
            assert answer.status in ("progress", "success"), answer
        finally:
            onec.close()
        readers = _children(serve.pid)
        assert readers, "serve runs no reading process"
        serve.send_signal(signal.SIGKILL)
        serve.wait(30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p, s) for p, s in readers.items()):
            time.sleep(0.1)
        left = [pid for pid, started in readers.items() if _alive(pid, started)]
        assert [] == left, f"serve's processes still running after it was killed: {left}"
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait(30)
        if serve.stdout is not None:  # else its pipe is collected in a later test, a warning there
            serve.stdout.close()
        for pid, started in readers.items():  # never leave them to the next test
            if _alive(pid, started):
                os.kill(pid, signal.SIGKILL)
