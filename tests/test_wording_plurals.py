"""Counts read as English everywhere (`pinakes.wording`): no message says "line(s)" or "root(s)",
and a count of one takes the singular in the messages that can meet one."""

from __future__ import annotations

import io
import re
import tokenize
from datetime import UTC, datetime
from pathlib import Path

import pytest

import pinakes
from pinakes.budget import LedgerDamagedError
from pinakes.doctor import DoctorContext
from pinakes.doctor.checks_budget import checks
from pinakes.eval.corpus import load_corpus_questions
from pinakes.eval.golden import GoldenSetError
from pinakes.init import init_kb
from tests.budget_helpers import Clock, caps, open_accountant, spend

SRC = Path(pinakes.__file__).parent
# "document(s)": a string of the product that hedges its count instead of counting.
HEDGED_PLURAL = re.compile(r"[A-Za-z]\(s\)")
# The plural helper's own docstring quotes the form it exists to prevent.
QUOTES_THE_MISTAKE = {SRC / "wording.py"}


def test_no_string_in_the_product_hedges_a_plural() -> None:
    found: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        if path in QUOTES_THE_MISTAKE:
            continue
        for token in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
            if token.type == tokenize.STRING and HEDGED_PLURAL.search(token.string):
                found.append(f"{path.relative_to(SRC)}:{token.start[0]}: {token.string[:80]}")
    assert not found, "use pinakes.wording (counted, noun_for):\n" + "\n".join(found)


def test_one_source_root_is_named_in_the_singular(tmp_path: Path) -> None:
    questions = tmp_path / "questions.jsonl"
    questions.write_text('{"id": "q1", "query": "tides", "relevant": ["nowhere.txt"]}\n', encoding="utf-8")
    with pytest.raises(GoldenSetError) as refused:
        load_corpus_questions(questions, tmp_path, ["docs"])
    assert "under the source root ['docs']" in refused.value.render()


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    init_kb(root, name="wording")
    return root


def test_one_damaged_ledger_line_is_one_line_in_both_remedies(kb: Path) -> None:
    spend(kb, "0.10", Clock(datetime.now(UTC)))
    ledger = kb / ".pinakes" / "ledger.jsonl"
    ledger.write_bytes(ledger.read_bytes().replace(b'"kind":"reconciliation"', b'"kind":"void"'))
    with pytest.raises(LedgerDamagedError) as refused:
        open_accountant(kb, caps())
    assert (refused.value.remedy or "").startswith("restore the line from a backup, or delete it by hand")
    (check,) = [c for c in checks(DoctorContext(kb)) if c.name == "spending ledger"]
    assert check.status == "FAIL"
    assert (check.remedy or "").startswith("restore the line from a backup, or delete it by hand")
