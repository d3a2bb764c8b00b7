"""What the budget costs one priced search, against the size of the spending ledger.

    python bench/bench_budget_ledger.py [--lines 0,2000,20000] [--rounds 30] [--before-src DIR]

A priced search (a priced HTTP reranker or query embedding) makes one plan and, per request, one
reservation and one reconciliation through the accountant. Each measurement runs in a fresh
process with a throwaway KB whose ledger holds `--lines` lines (reservation/reconciliation pairs,
one a minute) and reports medians over `--rounds` such searches after the first:

  open         Accountant.open: the ledger read (and decoded, CRC-checked) once per process
  first plan   the process's first plan (whatever it folds from the ledger first)
  search       one plan + one reservation + one reconciliation, wall (two fsynced appends included)
  search cpu   the same in process CPU time: what does not depend on the disk

`--before-src DIR` (a `git archive` of an earlier `src/`, e.g. the base of a change) runs the same
measurements with that code, alternating with this tree's at each ledger size: a before/after in
one run on one machine. Prints a table and one JSON line (for docs/perf/budget.md).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def child(lines: int, rounds: int) -> dict[str, float]:
    """One process's measurements (run with the code under test first on sys.path)."""
    from pinakes.budget import Accountant, CallShape, ModelPrice, PriceTable
    from pinakes.budget.ledger import LedgerRecord
    from pinakes.manifest import BudgetSection

    model = "bench-model"
    prices = PriceTable(as_of=datetime.date(2026, 12, 1), source="bench", usd_per_eur=Decimal("1"),
                        rate_as_of=datetime.date(2026, 12, 1), rate_source="bench",
                        models={model: ModelPrice(model, Decimal("1"), Decimal("1"))})
    kb = Path(tempfile.mkdtemp(prefix="pnk-bench-budget-"))
    ledger = kb / ".pinakes" / "ledger.jsonl"
    ledger.parent.mkdir()
    start = datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC)
    with open(ledger, "wb") as out:
        for n in range(lines // 2):
            common: dict[str, Any] = {"operation": "rerank", "operation_id": f"op{n:08d}", "call_id": f"call{n:08d}",
                      "model": model, "usd_per_eur": Decimal("1"), "prices_as_of": prices.as_of,
                      "rate_as_of": prices.rate_as_of, "kb_id": None, "ts": start + datetime.timedelta(minutes=n)}
            out.write(LedgerRecord(kind="reservation", input_tokens=1000, output_tokens=1,
                                   cost_usd=Decimal("0.001001"), **common).encode())
            out.write(LedgerRecord(kind="reconciliation", input_tokens=900, output_tokens=0,
                                   cost_usd=Decimal("0.000900"), **common).encode())
    budget = BudgetSection(confirm_above_eur=Decimal("100"), per_operation_eur=Decimal("100"),
                           daily_eur=Decimal("1000"), monthly_eur=Decimal("100000"))
    now = datetime.datetime(2026, 12, 1, 12, tzinfo=datetime.UTC)
    started = time.perf_counter()
    accountant = Accountant.open(kb, budget, clock=lambda: now, prices=prices)
    opened = time.perf_counter() - started
    shape = CallShape(model, max_input_tokens=1000, max_output_tokens=1)
    started = time.perf_counter()
    accountant.plan("rerank", [shape], interactive=False)
    first_plan = time.perf_counter() - started
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(rounds):
        started, cpu_started = time.perf_counter(), time.process_time()
        plan = accountant.plan("rerank", [shape], interactive=False)
        with plan.call(shape) as call:
            call.reconcile(input_tokens=900, output_tokens=0)
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
    return {"lines": lines, "open_ms": round(opened * 1000, 2), "first_plan_ms": round(first_plan * 1000, 2),
            "search_ms": round(statistics.median(wall) * 1000, 3),
            "search_cpu_ms": round(statistics.median(cpu) * 1000, 3)}


def measure(src: Path, lines: int, rounds: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, __file__, "--child", "--lines", str(lines), "--rounds", str(rounds)],
                          env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--lines", default="0,2000,20000")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--before-src", type=Path, help="an earlier src/ to measure alongside this tree's")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(int(args.lines), args.rounds)))
        return
    trees = {"after": REPO / "src"}
    if args.before_src is not None:
        trees = {"before": args.before_src.resolve(), **trees}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for lines in (int(value) for value in args.lines.split(",")):
        for name, src in trees.items():
            results[name].append(measure(src, lines, args.rounds))
    print(f"{os.cpu_count()} cpus, Python {platform.python_version()}, load {os.getloadavg()[0]:.1f}; "
          f"medians of {args.rounds} searches (a plan, a reservation, a reconciliation)")
    print(f"{'code':<7}{'lines':>8}{'open ms':>10}{'1st plan ms':>13}{'search ms':>11}{'search cpu ms':>15}")
    for name, rows in results.items():
        for row in rows:
            print(f"{name:<7}{row['lines']:>8}{row['open_ms']:>10}{row['first_plan_ms']:>13}"
                  f"{row['search_ms']:>11}{row['search_cpu_ms']:>15}")
    print(json.dumps({"date": datetime.date.today().isoformat(), "load_average": os.getloadavg()[0],
                      "rounds": args.rounds, **results}))


if __name__ == "__main__":
    main()
