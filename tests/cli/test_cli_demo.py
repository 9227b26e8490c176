"""``exchange demo`` (contract 6): the main job on the embedded default, nothing to configure."""

from __future__ import annotations

import json
import re

from clitools import Cli, assert_one_line_error, describe
from rich.cells import cell_len

RUSSIAN = {"LANG": "ru_RU.UTF-8", "COLUMNS": "80"}


def test_demo_runs_to_idle_prints_a_summary_and_writes_its_database_and_report(cli: Cli) -> None:
    directory = cli.cwd / "demo"

    # 50 SKUs keep the demo's poisoned and refused SKUs (SKU-0013, SKU-0042) and a third of
    # its rows: the shop takes 150 requests/s, so 200 SKUs were 6 s of waiting in the loop.
    result = cli(
        "demo", "--dir", str(directory), "--skus", "50", env={"COLUMNS": "80"}, timeout=120
    )

    assert result.returncode == 0, describe(result)
    assert "delivered" in result.stdout, describe(result)
    assert "quarantined" in result.stdout, describe(result)
    # The progress line fits a console of 80: the bar, its count and the time never cut off.
    staged = re.search(r"^staged (\d+) rows into ", result.stdout, re.MULTILINE)
    assert staged, describe(result)
    bar = next(line for line in result.stdout.splitlines() if line.startswith("delivering "))
    assert cell_len(bar) <= 80, bar
    assert re.search(rf" ━+[╸╺]?━* \d+/{staged[1]} ", bar) and re.search(r" \d:\d\d:\d\d", bar), bar
    assert (directory / "demo.db").is_file()
    report = json.loads((directory / "quarantine.json").read_text(encoding="utf-8"))
    assert report["entries"]
    assert report["summary"]["by_reason"]
    assert sum(report["summary"]["by_reason"].values()) == len(report["entries"])
    # The bar and the summary tell the story: no per-message log line tears through the bar
    # (the walk-through saw the worker's INFO and WARNING lines scroll through it).
    assert not [
        line for line in result.stderr.splitlines() if " INFO " in line or " WARNING " in line
    ], describe(result)


def test_demo_into_a_directory_that_cannot_be_created_exits_2_with_one_error_line(
    cli: Cli,
) -> None:
    (cli.cwd / "occupied").write_text("a file, not a directory", encoding="utf-8")

    result = cli("demo", "--dir", "occupied/demo", "--skus", "5")

    assert_one_line_error(result, "occupied")


def test_the_demo_speaks_russian_under_a_russian_locale_and_its_bar_fits_80_columns(
    cli: Cli,
) -> None:
    """Contract 15: ``make demo`` under a Russian locale prints Russian (a reason stays a
    code); its progress line fits a console of 80, the count of rows never cut off."""
    result = cli("demo", "--dir", "demo", "--skus", "50", env=RUSSIAN, timeout=120)

    assert result.returncode == 0, describe(result)
    out = result.stdout
    for russian in (
        "настройки демонстрации (для настоящего сайта задайте такие же):",
        "готово за ",
        "  доставлено ",
        "  в карантине ",
        "      invalid-contract ",
        "  применено на сайте дважды 0",
        "  на сайте последняя доставленная цена каждого артикула и вида цены: да",
        "отчёт карантина: ",
    ):
        assert russian in out, describe(result)
    for english in ("done in", "delivered", "quarantine report", "requests/s", "site holds"):
        assert english not in out, describe(result)
    staged = re.search(r"^принят[аоы] (\d+) строк[аи]? в ", out, re.MULTILINE)
    assert staged, describe(result)
    bar = next(line for line in out.splitlines() if line.startswith("доставка "))
    assert cell_len(bar) <= 80, bar
    assert re.search(rf" \d+/{staged[1]} \d:\d\d:\d\d ", bar), bar


def _lacking(stdout: str, said: str = "SKUs 1C sent that the shop lacks") -> list[str]:
    """The SKUs the summary lists under «SKUs 1C sent that the shop lacks»."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if said in line)
    listed = []
    for line in lines[start + 1 :]:
        if not line.startswith("      "):
            break
        listed.append(line.strip())
    return listed


def test_the_rehearsal_with_the_owners_list_of_skus_lists_those_the_shop_lacks(cli: Cli) -> None:
    """Issue 34 (contract 15): ``demo --catalogue FILE`` is the shop owner's rehearsal: the
    simulated site holds her SKUs and no others, and the summary lists the SKUs 1C sent that
    it lacks (quarantined, never a product invented for them)."""
    directory = cli.cwd / "demo"
    (cli.cwd / "shop.txt").write_text(
        "# артикулы магазина\nАРТ-001\nАРТ-002\n\nАРТ-003\nSKU-0004\nАРТ-005\n", encoding="utf-8"
    )
    result = cli(
        "demo", "--dir", str(directory), "--skus", "50", "--catalogue", "shop.txt", timeout=120
    )

    assert result.returncode == 0, describe(result)
    assert "the shop holds the 5 SKUs read from the catalogue and no others\n" in result.stdout
    # Her five SKUs get the demo's prices, and exactly three more she lacks (docs/targets.md).
    assert ["SKU-0005", "SKU-0006", "SKU-0007"] == _lacking(result.stdout), describe(result)
    assert "SKUs 1C sent that the shop lacks (quarantined): 3" in result.stdout
    assert "site holds the latest delivered price of every SKU and price type: yes" in (
        result.stdout
    )
    # Her report is the shop's answer about her SKUs: none of the demo's own bad rows.
    report = json.loads((directory / "quarantine.json").read_text(encoding="utf-8"))
    entries = {(e["aggregate"].split("/")[0], e["reason"]) for e in report["entries"]}
    assert {("SKU-0005", "http-404"), ("SKU-0006", "http-404"), ("SKU-0007", "http-404")} == (
        entries
    ), describe(result)


def test_the_rehearsal_with_a_woocommerce_export_lists_what_the_shop_lacks(cli: Cli) -> None:
    """The same with WooCommerce's product CSV export against the simulated WooCommerce shop:
    the SKUs it lacks are quarantined ``unknown-sku``, none invented on first lookup."""
    (cli.cwd / "wc-product-export.csv").write_text(
        "\ufeffID,Тип,Артикул,Имя\n"
        '1,simple,"А-1",Один\n2,variable,"А-2",Два\n3,variation,"А-3",Три\n'
        "4,simple,,Без артикула\n",
        encoding="utf-8",
    )
    directory = cli.cwd / "demo"
    result = cli(
        "demo",
        "--dir",
        str(directory),
        "--target",
        "woocommerce",
        "--catalogue",
        "wc-product-export.csv",
        timeout=120,
    )

    assert result.returncode == 0, describe(result)
    said = "the shop holds the 3 SKUs read from the catalogue and no others; 1 row without an SKU"
    assert said + " skipped\n" in result.stdout, describe(result)
    assert ["SKU-0003", "SKU-0004", "VAR-0005"] == _lacking(result.stdout), describe(result)
    assert "quarantined  unknown-sku            3" in result.stdout, describe(result)
    assert "the shop holds the newest delivered price of every SKU: yes" in result.stdout
    report = json.loads((directory / "quarantine-woocommerce.json").read_text(encoding="utf-8"))
    assert ["unknown-sku"] * 3 == [e["reason"] for e in report["entries"]], describe(result)


def test_a_russian_owners_rehearsal_with_her_russian_export_is_said_in_russian(cli: Cli) -> None:
    """Her WooCommerce export as a Russian shop writes it (Russian headers, «;»), under a
    Russian locale: how many SKUs were read and how many rows had no article, in one line;
    exactly the three SKUs she lacks; the summary in Russian."""
    (cli.cwd / "wc.csv").write_text(
        "\ufeffID;Тип;Артикул;Имя\n21;simple;АРТ-7;Молоко\n22;variation;АРТ-7-1;Молоко 1 л\n"
        "23;simple;;Без артикула\n24;simple;;Тоже без\n25;simple;АРТ-9;Хлеб\n",
        encoding="utf-8",
    )
    args = ("--target", "woocommerce", "--catalogue", "wc.csv")
    result = cli("demo", "--dir", "demo", *args, env=RUSSIAN, timeout=120)

    assert result.returncode == 0, describe(result)
    out = result.stdout
    said = "из каталога прочитано 3 артикула, в магазине только они; 2 строки без артикула"
    assert said + " пропущены\n" in out, describe(result)
    assert ["SKU-0003", "SKU-0004", "VAR-0005"] == _lacking(out, "Артикулы из 1С, которых нет"), (
        describe(result)
    )
    assert "  Артикулы из 1С, которых нет в магазине (в карантине): 3\n" in out
    assert "woocommerce: всё обработано за " in out
    assert "  в карантине  unknown-sku            3\n" in out, describe(result)
    assert "  в магазине самая новая доставленная цена каждого артикула: да\n" in out
    assert "idle after" not in out and "requests to the shop" not in out, describe(result)


def test_a_catalogue_for_a_target_that_cannot_tell_or_that_cannot_be_read_is_one_line(
    cli: Cli,
) -> None:
    (cli.cwd / "shop.txt").write_text("АРТ-001\n", encoding="utf-8")
    for args, said in (
        (("--target", "bitrix", "--catalogue", "shop.txt"), "--target api or woocommerce"),
        (("--catalogue", "missing.txt"), "missing.txt"),
    ):
        result = cli("demo", "--dir", "demo", *args)
        assert_one_line_error(result, said)
    (cli.cwd / "empty.txt").write_text("# nothing\n", encoding="utf-8")
    assert_one_line_error(cli("demo", "--catalogue", "empty.txt"), "names no SKU")


def test_a_bad_catalogue_or_target_is_one_line_in_russian_under_a_russian_locale(
    cli: Cli,
) -> None:
    """Contract 15: the owner's mistakes are said in her language, one line, exit 2."""
    (cli.cwd / "shop.txt").write_text("АРТ-001\n", encoding="utf-8")
    (cli.cwd / "empty.txt").write_text("# nothing\n", encoding="utf-8")
    (cli.cwd / "cp1251.csv").write_bytes("Артикул\nА-1\n".encode("cp1251"))
    (cli.cwd / "short.csv").write_text("ID;Тип;Артикул\n1;simple\n", encoding="utf-8")
    for args, said in (
        (
            ("--target", "bitrix", "--catalogue", "shop.txt"),
            "ошибка: --catalogue — только для --target api или woocommerce: bitrix не может "
            "сказать, каких артикулов нет в магазине",
        ),
        (("--catalogue", "missing.txt"), "ошибка: не удаётся прочитать каталог missing.txt: "),
        (("--catalogue", "empty.txt"), "ошибка: в каталоге empty.txt нет ни одного артикула"),
        (("--catalogue", "cp1251.csv"), "ошибка: каталог cp1251.csv — не текст в UTF-8"),
        (
            ("--catalogue", "short.csv"),
            "ошибка: short.csv, строка 2: ячеек меньше, чем столбцов в заголовке",
        ),
        (("--target", "shopify"), "ошибка: --target — это api, bitrix, woocommerce или rabbitmq"),
    ):
        result = cli("demo", "--dir", "demo", *args, env=RUSSIAN)
        assert 2 == result.returncode, describe(result)
        assert [said] == [line[: len(said)] for line in result.stderr.splitlines()], describe(
            result
        )
