"""The CommerceML reader's memory on 100 MB files (issue 21, item 10): the peak the reader
adds (``tracemalloc``, so the figure is the reader's own, not the interpreter's) and the
process's peak RSS, each file read by ``parse`` + ``Mapper`` in a process of its own.

Files, each about ``--mb`` MB:

- ``realistic``: 1C's offers, 3 prices each (``write_big_offers``);
- ``many-prices``: one offer of prices without end, each its type id 12 times (the crafted
  file of issue 21: an offer once held all of them until it ended);
- ``widest-kept``: offers of 64 prices (the most an offer may have) of 15 fields of 1,000
  characters each: the most an unfinished offer keeps.

The promise (contract 9a): a file of 100 MB raises the reader's peak by less than 64 MiB.
Figures are reported, not asserted (the suite keeps a small version:
tests/intake/test_cml_parse.py).

    python -m bench.cml_memory [--mb 100]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from exchange.dev.cml_gen import write_big_offers

HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?><КоммерческаяИнформация ВерсияСхемы="2.07">'
    "<ПакетПредложений><ТипыЦен><ТипЦены><Ид>t1</Ид><Наименование>Розничная</Наименование>"
    "</ТипЦены></ТипыЦен><Предложения>"
)
TAIL = "</Предложения></ПакетПредложений></КоммерческаяИнформация>"

READER = r"""
import json, resource, sys, tracemalloc
from exchange.intake.commerceml.mapping import Mapper
from exchange.intake.commerceml.parse import CmlError, parse
rows = 0
def out(aggregate, payload, name):
    global rows
    rows += 1
mapper = Mapper(price_types={"Розничная": "retail", "t1": "retail"}, sku_mode="id",
                known_types={}, articles={}, out=out)
tracemalloc.start()
error = None
with open(sys.argv[1], "rb") as stream:
    try:
        parse(stream, mapper)
    except CmlError as exc:
        error = str(exc)
_, peak = tracemalloc.get_traced_memory()
print(json.dumps({"peak_mib": round(peak / 2**20, 2),
                  "rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "rows": rows, "offers": mapper.counts.offers,
                  "too_many_prices": mapper.counts.too_many_prices, "error": error}))
"""


def _price(fields: int, text: str) -> str:
    return (
        "<Цена>"
        + f"<ИдТипаЦены>{text}</ИдТипаЦены>" * fields
        + "<ЦенаЗаЕдиницу>1.00</ЦенаЗаЕдиницу><Валюта>RUB</Валюта></Цена>"
    )


def _write(path: Path, size: int, head: str, unit: str, between: str, tail: str) -> int:
    with path.open("w", encoding="utf-8") as out:
        out.write(HEAD + head)
        written = 0
        while written < size:
            out.write(unit)
            written += len(unit.encode())
            out.write(between)
        out.write(tail + TAIL)
    return path.stat().st_size


def many_prices(path: Path, size: int) -> int:
    return _write(
        path, size, "<Предложение><Ид>BIG</Ид><Цены>", _price(12, "t1"), "", "</Цены></Предложение>"
    )


def widest_kept(path: Path, size: int) -> int:
    offer = "<Цены>" + _price(13, "t" * 1000) * 64 + "</Цены></Предложение>"
    return _write(path, size, "", "<Предложение><Ид>W</Ид>" + offer, "", "")


def realistic(path: Path, size: int) -> int:
    return write_big_offers(path, size // 1350)  # about 1.35 kB an offer


FILES: dict[str, Callable[[Path, int], int]] = {
    "realistic": realistic,
    "many-prices": many_prices,
    "widest-kept": widest_kept,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parent.parent
    report: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, write in FILES.items():
            path = Path(scratch) / f"{name}.xml"
            size = write(path, args.mb * 10**6)
            run = subprocess.run(
                [sys.executable, "-c", READER, str(path)],
                check=True,
                capture_output=True,
                text=True,
                cwd=here,
            )
            report[name] = {"mb": round(size / 10**6, 1), **json.loads(run.stdout)}
            path.unlink()
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
