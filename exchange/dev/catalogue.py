"""The shop owner's catalogue for a rehearsal (contract 15): the SKUs her shop really has, so that
the simulated shop holds those and no others, and the SKUs 1C sends that it lacks are reported
instead of invented on first lookup.

Two forms are read:

- a list of SKUs, one a line (blank lines and lines starting with ``#`` skipped);
- WooCommerce's product CSV export (Products → Export), as ``WC_Product_CSV_Exporter`` writes
  it (plugins/woocommerce/includes/export/class-wc-product-csv-exporter.php and
  abstract-wc-csv-exporter.php in woocommerce/woocommerce): a UTF-8 byte order mark, a header
  row of the columns' translated names (``get_default_column_names``: ``__( 'SKU' )``, which a
  Russian shop exports as «Артикул»; ``__( 'Type' )``, «Тип»), comma-separated (the
  ``woocommerce_product_export_delimiter`` filter may change it: a semicolon is read too),
  quoted by PHP's ``fputcsv``; a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a
  carriage return is prefixed with ``'`` (``escape_data``, against formula injection), taken
  off here. A row whose type is ``variation`` (``get_type``, never translated) is a variation;
  a product without a SKU has none to match.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The SKU column's header as WooCommerce writes it: its own words, translated by the shop's
# language (en, ru), or the column's id (the importer's own mapping accepts it too).
SKU_HEADERS = frozenset({"sku", "артикул"})
TYPE_HEADERS = frozenset({"type", "тип"})
_ESCAPED = ("'=", "'+", "'-", "'@", "'\t", "'\r")
# SKUs the demo's 1C sends beyond the owner's catalogue in a rehearsal (``exchange demo
# --catalogue``): what the summary then lists as the SKUs the shop lacks.
LACKING = 3


class CatalogueError(ValueError):
    """The catalogue file cannot be read: one line saying why."""


@dataclass(frozen=True, slots=True)
class Catalogue:
    skus: list[str]
    variations: frozenset[str] = field(default_factory=frozenset)
    # A CSV export's rows that name no SKU (skipped: nothing 1C could name); None for a list.
    without_sku: int | None = None


def read_catalogue(path: Path) -> Catalogue:
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise CatalogueError(f"the catalogue {path} cannot be read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise CatalogueError(f"the catalogue {path} is not UTF-8 text") from None
    return parse_catalogue(text, name=str(path))


def parse_catalogue(text: str, *, name: str = "the catalogue") -> Catalogue:
    first = text.split("\n", 1)[0]
    delimiter = ";" if first.count(";") > first.count(",") else ","
    header = next(csv.reader([first], delimiter=delimiter), [])
    columns = [cell.strip().casefold() for cell in header]
    sku_column = next((i for i, c in enumerate(columns) if c in SKU_HEADERS), None)
    if sku_column is None:
        lines = [s.strip() for s in text.splitlines()]
        return Catalogue(list(dict.fromkeys(s for s in lines if s and not s.startswith("#"))))
    type_column = next((i for i, c in enumerate(columns) if c in TYPE_HEADERS), None)
    rows = csv.reader(io.StringIO(text), delimiter=delimiter)
    next(rows)
    skus: list[str] = []
    variations: set[str] = set()
    without_sku = 0
    for number, row in enumerate(rows, start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) <= max(sku_column, type_column or 0):
            raise CatalogueError(f"{name}, row {number}: fewer cells than the header names")
        sku = _unescaped(row[sku_column].strip())
        if not sku:
            without_sku += 1  # a product without a SKU: nothing 1C could name
            continue
        skus.append(sku)
        types = row[type_column].split(",") if type_column is not None else []
        if "variation" in (t.strip() for t in types):
            variations.add(sku)
    return Catalogue(list(dict.fromkeys(skus)), frozenset(variations), without_sku)


def _unescaped(cell: str) -> str:
    return cell[1:] if cell.startswith(_ESCAPED) else cell


def rehearsal_names(demo_skus: Sequence[str], catalogue: Catalogue, *, held: int) -> dict[str, str]:
    """The demo's own SKUs as the owner's rehearsal names them: the first ``held`` become her
    catalogue's SKUs, in the file's order; the others keep the demo's names (SKUs her shop
    lacks), or become ``NOT-IN-SHOP-<n>`` where her catalogue has that name too."""
    hers = set(catalogue.skus)
    names = dict(zip(demo_skus[:held], catalogue.skus, strict=False))
    spare = (f"NOT-IN-SHOP-{n:04d}" for n in itertools.count(1))
    for sku in demo_skus[len(names) :]:
        names[sku] = next(s for s in spare if s not in hers) if sku in hers else sku
    return names


def renamed(rows: Sequence[dict[str, Any]], names: Mapping[str, str]) -> list[dict[str, Any]]:
    """``rows`` (staging rows) with each SKU of ``names`` renamed in its aggregate (the SKU
    alone, or ``<sku>/<price type>``) and in its payload's ``sku``, the payload otherwise left
    byte for byte (the demo's bad rows stay bad: an exponent, no JSON at all)."""
    out = []
    for row in rows:
        sku, slash, rest = str(row["aggregate"]).partition("/")
        aggregate = names.get(sku, sku) + slash + rest
        payload = _SKU_FIELD.sub(lambda found: _named(found, names), row["payload"], count=1)
        out.append({**row, "aggregate": aggregate, "payload": payload})
    return out


# A payload's ``"sku": "…"``: renamed in place, every other byte kept (a bad row stays bad).
_SKU_FIELD = re.compile(r'("sku"\s*:\s*)("(?:[^"\\]|\\.)*")')


def _named(found: re.Match[str], names: Mapping[str, str]) -> str:
    sku = json.loads(found[2])
    return found[1] + json.dumps(names[sku], ensure_ascii=False) if sku in names else found[0]
