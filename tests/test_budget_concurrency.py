"""Caps hold across processes (spec §5): two spenders sharing one ledger never exceed a cap together,
and a process killed between its reservation and its reconciliation leaves an unknown outcome that
the next run counts at the reserved amount."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from decimal import Decimal
from pathlib import Path

from pinakes.budget import Accountant
from tests.budget_helpers import PRICES, Clock, caps
from tests.conftest import REPO_ROOT

# A spender in its own interpreter: waits for GO, then reserves and reconciles €0.01 calls at their
# worst case until a reservation is refused; prints how many calls it made. The window between a
# reservation's check and its append is widened to 3 ms so the two processes really do contend for
# it: without the ledger lock this run measured damaged lines and refusals in 4 of 4 tries.
SPENDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from pinakes.budget import BudgetExceededError
    from pinakes.budget.accountant import Accountant
    from tests.budget_helpers import caps, eur_shape, open_accountant

    checked = Accountant._blocked
    def slow_check(self, *args, **kwargs):
        result = checked(self, *args, **kwargs)
        time.sleep(0.003)
        return result
    Accountant._blocked = slow_check

    kb, go = Path(sys.argv[1]), Path(sys.argv[2])
    accountant = open_accountant(kb, caps(daily_eur="0.50"))
    shape = eur_shape("0.01")
    plan = accountant.plan("extract", [shape], interactive=False)
    Path(sys.argv[3]).touch()  # ready
    while not go.exists():
        time.sleep(0.001)
    made = 0
    while True:
        try:
            with plan.call(shape) as call:
                call.reconcile(input_tokens=shape.max_input_tokens, output_tokens=shape.max_output_tokens)
        except BudgetExceededError:
            break
        made += 1
    print(made)
""")

# Reserves one call, says so, then waits to be killed before it can reconcile.
KILLED = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from tests.budget_helpers import caps, eur_shape, open_accountant

    accountant = open_accountant(Path(sys.argv[1]), caps())
    shape = eur_shape("0.35")
    plan = accountant.plan("extract", [shape], interactive=False)
    with plan.call(shape) as call:
        print(call.call_id, flush=True)
        time.sleep(60)
        call.reconcile(input_tokens=1, output_tokens=1)
""")


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


def test_two_processes_sharing_one_ledger_never_exceed_a_cap_together(tmp_path: Path) -> None:
    go = tmp_path / "go"
    ready = [tmp_path / f"ready-{n}" for n in range(2)]
    spenders = [subprocess.Popen([sys.executable, "-c", SPENDER, str(tmp_path), str(go), str(flag)],
                                 cwd=REPO_ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
                for flag in ready]
    deadline = time.monotonic() + 60
    while not all(flag.exists() for flag in ready) and time.monotonic() < deadline:
        time.sleep(0.01)  # both past their imports and plans, spinning on GO
    go.touch()
    results = [spender.communicate(timeout=120) for spender in spenders]
    assert all(spender.returncode == 0 for spender in spenders), results
    made = [int(out) for out, _err in results]
    report = Accountant.for_report(tmp_path, caps(daily_eur="0.50"), prices=PRICES, clock=Clock()).report()
    assert sum(made) == 50, made  # exactly the cap's worth: €0.50 of €0.01 calls, no more, no less
    assert min(made) > 0, made  # both spent: they contended for the same window
    assert report.windows[1].spent == Decimal("0.50") and report.damaged == ()
    reservations = sum(1 for line in (tmp_path / ".pinakes/ledger.jsonl").read_bytes().splitlines()
                       if b'"kind":"reservation"' in line)
    assert reservations == 50  # and never a reservation beyond it, even momentarily


def test_a_kill_between_reservation_and_reconciliation_is_an_unknown_outcome(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", KILLED, str(tmp_path)], cwd=REPO_ROOT, env=child_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        call_id = child.stdout.readline().strip()
        assert call_id, child.stderr.read() if child.stderr else ""
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL

    accountant = Accountant.open(tmp_path, caps(daily_eur="0.50"), prices=PRICES, clock=Clock())
    report = accountant.report()
    assert [(u.call_id, u.reserved_eur) for u in report.unknown] == [(call_id, Decimal("0.35"))]
    assert report.windows[1].spent == Decimal("0.35")
    from tests.budget_helpers import eur_shape

    plan = accountant.plan("extract", [eur_shape("0.15")], interactive=False)  # 0.35 + 0.15 = the cap
    assert plan.worst_case_eur == Decimal("0.15")
