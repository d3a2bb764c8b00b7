"""The committed demo-KB baseline, checked with the real packaged model (spec §7's CI gate).

Heavy: a cold sync of the demo KB with all-MiniLM-L6-v2 takes ~30-60 s on a 2-core machine.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pinakes.cli import main

DEMO_ROOT = Path(__file__).resolve().parent / "demo-kb"


@pytest.mark.heavy
def test_the_demo_kb_passes_its_committed_baseline_with_the_real_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "demo-kb"
    shutil.copytree(DEMO_ROOT, root, ignore=shutil.ignore_patterns(".pinakes"))
    committed = json.loads((DEMO_ROOT / "eval" / "baseline.json").read_text(encoding="utf-8"))
    code = main(["eval", str(root), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["regressions"] == [] and code == 0, data["regressions"]
    assert data["header"]["embedding"] == committed["header"]["embedding"]
    # The abstention rates are measured, not null: the demo manifest carries fitted thresholds.
    totals = data["scoreboard"]["classes"]["all"]
    assert totals["false_abstain"]["value"] is not None and totals["false_confidence"]["value"] is not None
