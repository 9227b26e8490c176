"""The bench's figures as Markdown tables (spliced into docs/benchmarks/README.md) and a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Issue 13, item 7: a worker's CPU per delivered single-request message at most this many times
# the floor (the best client's request alone + claim and record alone, SQLite), and the batch
# API at this many messages/s at the site, SQLite, one worker.
GOAL_CPU_FLOOR_RATIO = 1.25
GOAL_BATCH_RATE = 12_000

BEGIN = "<!-- bench:results:begin (written by python -m bench; edits here are overwritten) -->"
END = "<!-- bench:results:end -->"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _ratio(value: float | None, base: float | None) -> str:
    if not value or not base:
        return "–"
    return f"{value / base:.2f}"


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _runs(runs: list[float]) -> str:
    return " / ".join(f"{r:,.0f}" for r in runs)


def batch_missing(row: dict[str, Any]) -> bool:
    """A batch row whose service sent no batch request: the setting is not implemented."""
    return bool(row["site_batch_size"] > 1 and row["batch_requests"] == 0)


def _checks(row: dict[str, Any]) -> str:
    failed = [name for name, ok in row["checks"].items() if not ok]
    return "all pass" if not failed else "FAILED: " + ", ".join(failed)


def tables(results: dict[str, Any]) -> str:
    out: list[str] = []
    m = results["machine"]
    p = results["parameters"]
    out.append(
        _table(
            ["machine", ""],
            [
                ["CPU", f"{m['cpu']}, {m['cores']} cores"],
                ["RAM", f"{m['ram_gb']} GB"],
                ["OS", m.get("os", "–")],
                ["Python", m["python"]],
                ["PostgreSQL", m["postgresql"]],
                ["SQLite", m["sqlite"]],
                ["date", m["date"]],
                ["commit", f"`{m['commit']}`"],
                [
                    "load average (1, 5, 15 min)",
                    f"{m['load_at_start']} at start, {m.get('load_at_end', '–')} at end",
                ],
                ["bench duration", f"{m.get('bench_seconds', '–')} s"],
            ],
        )
    )
    out.append(
        f"Parameters: {p['messages']:,} messages per service run, "
        f"{p['concurrency']} requests in flight per process (EXCHANGE_CONCURRENCY), "
        f"worker log level {p['log_level']}, {p['ceiling_messages']:,} requests per ceiling run "
        f"(median of {p['ceiling_repeats']}), service rows: median of {p['repeats']} run(s), "
        f"{p['intake_rows']:,} intake rows{' (--quick)' if p['quick'] else ''}."
    )
    ceiling = results.get("ceiling")
    best = ceiling["best"]["rate"] if ceiling else None
    httpx_rate = ceiling["httpx"] if ceiling else None
    if ceiling:
        rows = [
            [
                f"`{r['client']}`",
                "bench/fastsite.py" if r["site"] == "fast" else "exchange.dev.sitesim (threaded)",
                _rate(r["rate"]),
                _ratio(r["rate"], best),
                _runs(r["runs"]),
            ]
            for r in ceiling["rows"]
        ]
        out.append("### The ceiling: Python HTTP clients alone")
        out.append(
            _table(["client", "site", "requests/s (median)", "÷ best", "runs"], rows)
            + f"\n\nThe ceiling is `{ceiling['best']['client']}` on the fast site: "
            f"{_rate(best)} requests/s."
        )
    service = results.get("service") or []
    if service:
        rows = []
        for r in service:
            if batch_missing(r):
                rows.append(
                    [r["label"], "not available: the service sent no batch request"] + ["–"] * 11
                )
                continue
            rows.append(
                [
                    r["label"],
                    _rate(r["rate"]),
                    _ratio(r["rate"], best),
                    _ratio(r["rate"], httpx_rate),
                    _rate(r["site_rate"]),
                    _ratio(r["site_rate"], best),
                    f"{r['wall_s']:.1f}",
                    f"{r['worker_cpu_s']:.1f}",
                    _seconds(r.get("worker_cpu_window_s")),
                    f"{r['site_cpu_s']:.1f}",
                    _cores_busy(r),
                    f"{r['peak_rss_mb']:.0f}",
                    _checks(r),
                ]
            )
        out.append("### The service end to end: `exchange run --until-idle`")
        out.append(
            _table(
                [
                    "database, requests",
                    "messages/s",
                    "÷ ceiling",
                    "÷ httpx",
                    "messages/s at the site",
                    "÷ ceiling, at the site",
                    "wall s",
                    "worker CPU s",
                    "worker CPU s, first to last effect",
                    "site CPU s",
                    "cores busy",
                    "worker peak RSS MB",
                    "checks",
                ],
                rows,
            )
        )
    workers = results.get("workers") or []
    if workers:
        one = next((r["rate"] for r in workers if r["workers"] == 1), None)
        one_at_site = next((r["site_rate"] for r in workers if r["workers"] == 1), None)
        rows = [
            [
                str(r["workers"]),
                _rate(r["rate"]),
                _ratio(r["rate"], one),
                _rate(r["site_rate"]),
                _ratio(r["site_rate"], one_at_site),
                _ratio(r["rate"], best),
                f"{r['wall_s']:.1f}",
                f"{r['worker_cpu_s']:.1f}",
                _other_cpu(r),
                _cores_busy(r),
                " / ".join(f"{x:.0f}" for x in r["peak_rss_mb_each"]),
                _checks(r),
            ]
            for r in workers
        ]
        out.append("### PostgreSQL, several worker processes")
        out.append(
            _table(
                [
                    "workers",
                    "messages/s",
                    "÷ 1 worker",
                    "messages/s at the site",
                    "÷ 1 worker, at the site",
                    "÷ ceiling",
                    "wall s",
                    "CPU s (all workers)",
                    "CPU s (site, database, rest)",
                    "cores busy",
                    "peak RSS MB each",
                    "checks",
                ],
                rows,
            )
            + _machine_bound(workers)
        )
    pg_rows = [
        r
        for r in (results.get("service") or []) + (results.get("workers") or [])
        if r.get("pg_tables") and not batch_missing(r)
    ]
    if pg_rows:
        rows = []
        for r in pg_rows:
            t = r["pg_tables"]
            n = r["messages"]
            messages, history = t.get("messages", {}), t.get("message_history", {})
            rows.append(
                [
                    r["label"],
                    str(r.get("peak_pg_connections", "–")),
                    f"{messages.get('bytes', 0) / 2**20:.1f}",
                    f"{history.get('bytes', 0) / 2**20:.1f}",
                    f"{(messages.get('bytes', 0) + history.get('bytes', 0)) / n:,.0f}",
                    f"{history.get('live', 0) / n:.1f}",
                    f"{messages.get('dead', 0) / n:.1f}",
                ]
            )
        out.append("### PostgreSQL after each run: connections, table sizes, dead rows")
        out.append(
            _table(
                [
                    "run",
                    "peak connections (all workers)",
                    "messages MB",
                    "message_history MB",
                    "bytes per message (both, with indexes)",
                    "history rows per message",
                    "dead messages rows per message",
                ],
                rows,
            )
        )
    intake = results.get("intake") or []
    if intake:
        rows = [
            [
                r["database"],
                f"{r['rows']:,}",
                f"{r['staging_s']:.1f}",
                f"{r['intake_s']:.1f}",
                f"{r['coalesce_s']:.1f}",
                _rate(r["rows"] / (r["intake_s"] + r["coalesce_s"])),
                _ratio(r["intake_s"] + r["coalesce_s"], r["staging_s"]),
                _ratio(r["intake_s"], r["staging_s"]),
                "" if r.get("intake_cpu_ratio") is None else f"{r['intake_cpu_ratio']:.2f}",
                "" if r.get("load_average") is None else f"{r['load_average']:.1f}",
                f"{r['peak_rss_mb']:.0f}",
            ]
            for r in intake
        ]
        out.append("### Intake and coalescing alone")
        out.append(
            _table(
                [
                    "database",
                    "staging rows",
                    "staging INSERT s (baseline)",
                    "intake s",
                    "coalesce s",
                    "rows/s (intake + coalesce)",
                    "÷ INSERT",
                    "intake ÷ INSERT",
                    "intake CPU ÷ INSERT CPU",
                    "load",
                    "peak RSS MB",
                ],
                rows,
            )
        )
    budget = results.get("budget")
    if budget:
        out.append("### What a delivered message costs, part by part")
        out.append(_budget(budget, ceiling, service))
        out.append("### Against the goals (issue 13, item 7)")
        out.append(goal_lines(goals(ceiling, budget, service)))
    if results.get("peer"):
        out.append("### The peer: procrastinate on issue 35's job")
        out.append(peer_table(results["peer"]))
    if results.get("scale"):
        out.append("### PostgreSQL, several workers where the shop is the limit")
        out.append(scale_table(results["scale"]))
    if results.get("growth"):
        from bench.growth import table as growth_table

        out.append("### Claim and record with a long history in the table")
        out.append(growth_table(results["growth"]))
    errors = results.get("errors") or {}
    if errors:
        text = "; ".join(f"{k}: {' '.join(str(v).split())[:300]}" for k, v in errors.items())
        out.append(f"**Failed sections:** {text}")
    if results.get("pace"):
        from bench.pace import table as pace_table

        out.append(
            "**At the shop's pace** (issue 13; `python -m bench.pace`, one worker, "
            "`EXCHANGE_CONCURRENCY=32`, SQLite; plot: pace.png)\n\n" + pace_table(results["pace"])
        )
    return "\n\n".join(out) + "\n"


# Issue 35: the service's whole job on PostgreSQL against the peer's delivery (item 7), and
# 2 and 4 workers against one where the shop is the limit (item 5).
GOAL_PEER_RATIO = 5.0
GOAL_SCALE = {2: 1.8, 4: 3.2}


def peer_table(peer: dict[str, Any]) -> str:
    """The service's rows and the peer's, and the ratio against issue 35's goal."""
    rows = [
        [
            f"exchange, {r['label']}, end to end",
            _rate(r["rate"]),
            _rate(r["site_rate"]),
            f"{r['wall_s']:.1f}",
            _runs(r["runs"]),
            _checks(r),
        ]
        for r in peer["service"]
    ]
    p = peer["peer"]
    rows.append(
        [
            f"{p['peer']}, {p['jobs']:,} jobs, the worker alone",
            _rate(p["rate"]),
            _rate(p["site_rate"]),
            f"{p['seconds']:.1f}",
            _runs(p["runs"]),
            _checks(p),
        ]
    )
    table = _table(
        ["job", "deliveries/s", "at the site", "s", "runs (deliveries/s)", "checks"], rows
    )
    verdict = "meets" if peer["ratio"] >= GOAL_PEER_RATIO else "misses"
    at_site = peer.get("ratio_at_site")
    return (
        f"{table}\n\nThe service's whole job on PostgreSQL (start, intake and coalescing of "
        f"{peer['skus'] * peer['versions']:,} rows included) ran at {peer['ratio']:.2f}x the "
        f"peer's delivery alone ({verdict} the goal of {GOAL_PEER_RATIO:g}x); at the site, "
        f"{'–' if at_site is None else f'{at_site:.2f}'}x. PostgreSQL took "
        f"{peer['postgresql_time_over_sqlite']:.2f}x SQLite's time on the same job "
        f"(issue 35 item 1's goal: 1.3x). Load average at the end: {peer['load']}."
    )


def scale_table(scale: dict[str, Any]) -> str:
    """1, 2 and 4 workers against a slow site: rates, ratios to one worker, goals, checks."""
    rows = []
    for r in scale["rows"]:
        goal = GOAL_SCALE.get(r["workers"])
        met = "–" if goal is None else ("meets" if r["ratio_at_site"] >= goal else "misses")
        rows.append(
            [
                str(r["workers"]),
                _rate(r["rate"]),
                f"{r['ratio']:.2f}",
                _rate(r["site_rate"]),
                "–" if r["ratio_at_site"] is None else f"{r['ratio_at_site']:.2f}",
                "–" if goal is None else f"{goal:g}x: {met}",
                f"{r['wall_s']:.1f}",
                _cores_busy(r),
                _limits(r),
                _runs(r["runs"]),
                _checks(r),
            ]
        )
    table = _table(
        [
            "workers",
            "messages/s",
            "÷ 1 worker",
            "at the site",
            "÷ 1 worker, at the site",
            "goal (at the site)",
            "wall s",
            "cores busy",
            "in flight, limit at the end (each worker)",
            "runs (messages/s)",
            "checks",
        ],
        rows,
    )
    return (
        f"{scale['messages']:,} prices, the site answering after {scale['latency_ms']:g} ms, "
        f"EXCHANGE_CONCURRENCY per worker as above; checks: every worker exited 0, every "
        f"message delivered, one effect per message at the site, no aggregate in flight twice "
        f"(contract 4). Load average at the end: {scale['load']}.\n\n{table}"
    )


def _limits(row: dict[str, Any]) -> str:
    """Each worker's concurrency limit of its maximum as it last wrote it (contract 5c)."""
    paces = row.get("worker_paces") or {}
    shown = [f"{p.get('limit')}/{p.get('max_limit')}" for _, p in sorted(paces.items())]
    return " · ".join(shown) or "–"


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _service_row(
    service: list[dict[str, Any]], database: str, batch: bool
) -> dict[str, Any] | None:
    for r in service:
        if r["database"] == database and r["workers"] == 1 and (r["site_batch_size"] > 1) == batch:
            return None if batch_missing(r) else r
    return None


def goals(
    ceiling: dict[str, Any] | None, budget: dict[str, Any] | None, service: list[dict[str, Any]]
) -> dict[str, Any]:
    """Issue 13 item 7's goals from one run's sections; a figure a section did not give is None,
    and a goal is met only when its figure is there, within the goal, and its run passed its
    checks.

    The floor is the best client's request alone (µs per request at the ceiling's best rate)
    plus claim and record per message alone on SQLite (``bench.lease_cost``). The worker's CPU
    per delivered message is the SQLite single-request row's, whole process (``wait4``: start-up,
    intake and coalescing included) and inside the delivery window (the site's first to last
    effect, sampled: bench/cpu.py).
    """
    request_us = 1e6 / ceiling["best"]["rate"] if ceiling and ceiling["best"]["rate"] else None
    claim_us = budget["claim_record_us_sqlite"] if budget else None
    floor = request_us + claim_us if request_us is not None and claim_us is not None else None
    # The same floor in CPU alone (the client's process, the claim's): wall time alone grows
    # with whatever else keeps the machine busy, the worker's CPU much less.
    request_cpu = (ceiling or {}).get("best", {}).get("cpu_us")
    claim_cpu = (budget or {}).get("claim_record_cpu_us_sqlite")
    cpu_floor = (
        request_cpu + claim_cpu if request_cpu is not None and claim_cpu is not None else None
    )
    single = _service_row(service, "sqlite", batch=False)
    batch = _service_row(service, "sqlite", batch=True)

    def per_message(row: dict[str, Any] | None, key: str) -> float | None:
        if row is None or row.get(key) is None:
            return None
        return float(row[key]) / row["messages"] * 1e6

    def cpu_goal(us: float | None) -> dict[str, Any]:
        ratio = us / floor if us is not None and floor else None
        met = ratio is not None and ratio <= GOAL_CPU_FLOOR_RATIO and bool(single and single["ok"])
        cpu_ratio = us / cpu_floor if us is not None and cpu_floor else None
        return {"us": us, "ratio": ratio, "met": met, "ratio_cpu_floor": cpu_ratio}

    rate = batch["site_rate"] if batch else None
    return {
        "request_us": request_us,
        "request_client": ceiling["best"]["client"] if ceiling else None,
        "claim_record_us_sqlite": claim_us,
        "floor_us": floor,
        "request_cpu_us": request_cpu,
        "claim_record_cpu_us_sqlite": claim_cpu,
        "cpu_floor_us": cpu_floor,
        "cpu_goal_ratio": GOAL_CPU_FLOOR_RATIO,
        "single_ok": single["ok"] if single else None,
        "worker_cpu_whole": cpu_goal(per_message(single, "worker_cpu_s")),
        "worker_cpu_window": cpu_goal(per_message(single, "worker_cpu_window_s")),
        "batch_goal_rate": GOAL_BATCH_RATE,
        "batch_ok": batch["ok"] if batch else None,
        "batch_rate": rate,
        "batch_ratio": rate / GOAL_BATCH_RATE if rate else None,
        "batch_met": bool(rate is not None and rate >= GOAL_BATCH_RATE and batch and batch["ok"]),
    }


def goal_lines(g: dict[str, Any]) -> str:
    """The goals as a table and a sentence, from ``goals()``."""

    def us(value: float | None) -> str:
        return "–" if value is None else f"{value:,.1f}"

    def verdict(met: bool, figure: float | None, ok: bool | None) -> str:
        if figure is None:
            return "not measured"
        if ok is False:
            return "not met (the run's checks failed)"
        return "met" if met else "not met"

    goal = g["cpu_goal_ratio"]
    floor = g["floor_us"]

    def cpu_row(label: str, part: dict[str, Any]) -> list[str]:
        measured = "–"
        if part["us"] is not None:
            measured = f"{us(part['us'])} µs"
            if part["ratio"] is not None:
                measured += f" = {part['ratio']:.2f} × the floor"
            if part["ratio_cpu_floor"] is not None:
                measured += f" ({part['ratio_cpu_floor']:.2f} × the floor in CPU)"
        return [
            label,
            measured,
            f"≤ {goal:.2f} × the floor",
            verdict(part["met"], part["ratio"], g["single_ok"]),
        ]

    client = f" (`{g['request_client']}`)" if g["request_client"] else ""
    rows = [
        [
            f"the floor: the best client's request alone{client} + claim and record alone, SQLite",
            f"{us(g['request_us'])} + {us(g['claim_record_us_sqlite'])} = {us(floor)} µs",
            "",
            "",
        ],
        [
            "the floor in CPU: the same client's CPU per request + claim and record's CPU, alone",
            f"{us(g['request_cpu_us'])} + {us(g['claim_record_cpu_us_sqlite'])} = "
            f"{us(g['cpu_floor_us'])} µs",
            "",
            "",
        ],
        cpu_row(
            "worker CPU per delivered message, single requests, SQLite, whole process",
            g["worker_cpu_whole"],
        ),
        cpu_row(
            "worker CPU per delivered message, single requests, SQLite, first to last effect",
            g["worker_cpu_window"],
        ),
        [
            "batch API, SQLite, one worker, messages/s at the site",
            _rate(g["batch_rate"])
            + ("" if g["batch_ratio"] is None else f" = {g['batch_ratio']:.2f} × the goal"),
            f"≥ {g['batch_goal_rate']:,}",
            verdict(g["batch_met"], g["batch_rate"], g["batch_ok"]),
        ],
    ]
    text = _table(["figure", "measured", "goal", "met"], rows)
    notes = []
    if floor is not None:
        notes.append(
            f"{goal:.2f} × the floor is {goal * floor:,.1f} µs of the worker's CPU per message."
        )
    notes.append(
        "The floor is wall time alone (requests/s, claims and records/s), as the goal has it: "
        "on a machine busy with other work it grows with the load more than the worker's CPU "
        "does, so a goal met at a high load average says little; the floor in CPU is given "
        "beside it for that reason, and is not the goal's."
    )
    notes.append(
        "The whole process counts Python's start-up, intake and coalescing of the staged rows "
        "and the final idle check; first to last effect counts delivery alone (the worker's CPU "
        "sampled every 20 ms, interpolated at the site's first and last effect)."
    )
    return text + "\n\n" + " ".join(notes)


def _cores_busy(row: dict[str, Any]) -> str:
    busy = row.get("machine_cpu_s")
    if busy is None or not row.get("wall_s"):
        return "–"
    return f"{busy / row['wall_s']:.2f} of {row.get('cores', '?')}"


def _other_cpu(row: dict[str, Any]) -> str:
    busy = row.get("machine_cpu_s")
    return "–" if busy is None else f"{busy - row['worker_cpu_s']:.1f}"


def _machine_bound(workers: list[dict[str, Any]]) -> str:
    """What the machine allows several workers, from what one worker's run cost it."""
    one = next((r for r in workers if r["workers"] == 1), None)
    if not one or not one.get("machine_cpu_s") or not one.get("cores"):
        return ""
    per_message = one["machine_cpu_s"] / one["messages"]  # the whole machine's CPU, all parts
    most = one["cores"] / per_message
    return (
        f"\n\nWith one worker, each message cost the whole machine {per_message * 1e6:,.0f} µs "
        f"of CPU (worker, site, PostgreSQL and the rest). At that cost {one['cores']} cores "
        f"deliver at most {most:,.0f} messages/s on the wall clock, however many workers: "
        f"{most / one['rate']:.2f}× one worker."
    )


def _budget(
    budget: dict[str, Any], ceiling: dict[str, Any] | None, service: list[dict[str, Any]]
) -> str:
    """Each part alone (bench/budget.py) against the ceiling and the service rows."""

    def us(rate: float | None) -> float | None:
        return 1e6 / rate if rate else None

    def service_us(database: str, batch: bool) -> float | None:
        for r in service:
            if r["database"] == database and (r["site_batch_size"] > 1) == batch:
                return None if batch_missing(r) else us(r["site_rate"])
        return None

    clients = {
        r["client"]: r["rate"] for r in (ceiling or {}).get("rows", []) if r["site"] == "fast"
    }
    best = us(ceiling["best"]["rate"]) if ceiling else None
    client = us(clients.get("siteclient+uvloop"))
    line, judge = budget["outcome_line_us"], budget["judge_us"]
    lite, pg = budget["claim_record_us_sqlite"], budget["claim_record_us_postgresql"]
    item = budget["batch_item_us"]

    def cell(value: float | None) -> str:
        return "–" if value is None else f"{value:,.1f}"

    single = None if client is None else client + lite + line + judge
    batched = lite + line + judge + item
    rows = [
        ["the best client's request alone (the ceiling's)", cell(best), "ceiling table"],
        ["the service's request (`siteclient+uvloop`)", cell(client), "ceiling table"],
        ["claim + record, SQLite", cell(lite), "`bench.lease_cost`"],
        ["claim + record, PostgreSQL (wall time)", cell(pg), "`bench.lease_cost`"],
        ["the outcome line", cell(line), "`worker.log_outcome`"],
        ["judging the answer", cell(judge), "`classify` + `decide`"],
        ["batch API, per item: body, join, split of the answer", cell(item), "`batch`"],
        [
            "**sum, single requests, SQLite**",
            cell(single),
            "request + claim/record + line + judging",
        ],
        ["measured, single requests, SQLite", cell(service_us("sqlite", False)), "service table"],
        ["**sum, batch API, SQLite**", cell(batched), "claim/record + line + judging + item"],
        ["measured, batch API, SQLite", cell(service_us("sqlite", True)), "service table"],
    ]
    text = _table(["part", "µs per message", "measured by"], rows)
    notes = []
    if best and single:
        notes.append(
            f"Half the ceiling is {2 * best:,.0f} µs per message; the parts of a single "
            f"request alone sum to {single:,.0f} µs, so with this work per message one worker "
            f"reaches at most {best / single:.2f} of the ceiling."
        )
    notes.append(
        f"20,000 messages/s is 50 µs per message; the parts of a batched message alone sum to "
        f"{batched:,.0f} µs, so one worker reaches at most {1e6 / batched:,.0f} messages/s."
    )
    return text + "\n\n" + " ".join(notes)


def update_readme(results: dict[str, Any], path: Path) -> None:
    """Put the tables between the markers of ``path``; a missing file gets a bare page."""
    block = f"{BEGIN}\n\n{tables(results)}\n{END}"
    if path.exists():
        text = path.read_text()
        if BEGIN in text and END in text:
            head, rest = text.split(BEGIN, 1)
            tail = rest.split(END, 1)[1]
            path.write_text(head + block + tail)
            return
    path.write_text(f"# Benchmarks\n\n![throughput](throughput.png)\n\n{block}\n")


def _failed(row: dict[str, Any]) -> str:
    return "" if row["ok"] else " (checks FAILED)"


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars: list[tuple[str, float, str]] = []
    for r in (results.get("ceiling") or {}).get("rows", []):
        site = "fast site" if r["site"] == "fast" else "threaded sitesim"
        color = "tab:gray" if r["site"] == "fast" else "silver"
        bars.append((f"client {r['client']} → {site}", r["rate"], color))
    # Each service row twice: delivery alone (first to last effect at the site, the figure to
    # set against the clients') and the wall clock of the whole run (start-up and intake too).
    for rows, color, light in (
        (results.get("service") or [], "tab:blue", "lightsteelblue"),
        (results.get("workers") or [], "tab:green", "darkseagreen"),
    ):
        for r in rows:
            if batch_missing(r):
                continue
            if r.get("site_rate"):
                bars.append(
                    (f"service: {r['label']}, at the site{_failed(r)}", r["site_rate"], color)
                )
            bars.append((f"service: {r['label']}, wall clock{_failed(r)}", r["rate"], light))
    if not bars:
        return
    figure, axes = plt.subplots(figsize=(9, 0.45 * len(bars) + 1.5))
    labels = [b[0] for b in bars][::-1]
    values = [b[1] for b in bars][::-1]
    colors = [b[2] for b in bars][::-1]
    axes.barh(labels, values, color=colors)
    for y, value in enumerate(values):
        axes.text(value, y, f" {value:,.0f}", va="center", fontsize=8)
    m = results["machine"]
    axes.set_xlabel("messages (requests) per second, loopback")
    axes.set_title(
        f"exchange throughput, {results['parameters']['concurrency']} in flight per process\n"
        f"{m['cpu']}, {m['cores']} cores, {m['date']}",
        fontsize=9,
    )
    axes.set_xlim(0, max(values) * 1.2)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
