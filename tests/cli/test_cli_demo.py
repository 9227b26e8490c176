"""``exchange demo`` (contract 6): the main job on the embedded default, nothing to configure."""

from __future__ import annotations

import json

from clitools import Cli, assert_one_line_error, describe


def test_demo_runs_to_idle_prints_a_summary_and_writes_its_database_and_report(cli: Cli) -> None:
    directory = cli.cwd / "demo"

    # 50 SKUs keep the demo's poisoned and refused SKUs (SKU-0013, SKU-0042) and a third of
    # its rows: the shop takes 150 requests/s, so 200 SKUs were 6 s of waiting in the loop.
    result = cli("demo", "--dir", str(directory), "--skus", "50", timeout=120)

    assert result.returncode == 0, describe(result)
    assert "delivered" in result.stdout, describe(result)
    assert "quarantined" in result.stdout, describe(result)
    assert (directory / "demo.db").is_file()
    report = json.loads((directory / "quarantine.json").read_text(encoding="utf-8"))
    assert report["entries"]
    assert report["summary"]["by_reason"]
    assert sum(report["summary"]["by_reason"].values()) == len(report["entries"])


def test_demo_into_a_directory_that_cannot_be_created_exits_2_with_one_error_line(
    cli: Cli,
) -> None:
    (cli.cwd / "occupied").write_text("a file, not a directory", encoding="utf-8")

    result = cli("demo", "--dir", "occupied/demo", "--skus", "5")

    assert_one_line_error(result, "occupied")


def _lacking(stdout: str) -> list[str]:
    """The SKUs the summary lists under «SKUs 1C sent that the shop lacks»."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "SKUs 1C sent that the shop lacks" in line)
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
    assert "the site holds the 5 SKUs of the catalogue and no others" in result.stdout
    # Her five SKUs get the demo's prices; three more (and the plain-aggregate one) she lacks.
    assert ["SKU-0005", "SKU-0006", "SKU-0007", "SKU-PLAIN"] == _lacking(result.stdout), describe(
        result
    )
    assert "SKUs 1C sent that the shop lacks (quarantined) 4" in result.stdout
    assert "site holds the latest delivered price of every SKU and price type: yes" in (
        result.stdout
    )
    report = json.loads((directory / "quarantine.json").read_text(encoding="utf-8"))
    lacking = {e["aggregate"].split("/")[0] for e in report["entries"] if e["reason"] == "http-404"}
    assert {"SKU-0005", "SKU-0006", "SKU-0007", "SKU-PLAIN"} == lacking


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
    assert ["SKU-0003", "SKU-0004", "VAR-0005", "NOSUCH-0001"] == _lacking(result.stdout), describe(
        result
    )
    assert "quarantined  unknown-sku            4" in result.stdout, describe(result)
    assert "the shop holds the newest delivered price of every SKU: yes" in result.stdout


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
