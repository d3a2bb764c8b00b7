"""Every message that tells a user to calibrate names the one step that does it,
`pnk eval --fit-confidence --write` (it writes the fitted block into pinakes.toml itself): search's
unknown-confidence reasons, doctor's remedy, and the comment a new KB's manifest carries."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from pinakes.doctor import DoctorContext, run_checks
from pinakes.init import init_kb
from pinakes.search.confidence import assess
from pinakes.template_catalog import TemplateCatalog

ONE_STEP = "`pnk eval --fit-confidence --write`"


@dataclass(frozen=True)
class Thresholds:
    high: float
    low: float
    fitted_for: str


def test_an_uncalibrated_search_names_the_one_step() -> None:
    confidence = assess(passage_count=3, rerank_top=None, best_cosine=0.5, thresholds=None,
                        reranker_model=None, embedding_model="sentence-transformers/all-MiniLM-L6-v2")
    assert confidence.level == "unknown" and ONE_STEP in confidence.reason


def test_thresholds_fitted_for_another_scorer_name_the_one_step() -> None:
    other = Thresholds(high=0.6, low=0.35, fitted_for="BAAI/bge-small-en-v1.5, demo golden set")
    confidence = assess(passage_count=3, rerank_top=None, best_cosine=0.9, thresholds=other,
                        reranker_model=None, embedding_model="sentence-transformers/all-MiniLM-L6-v2")
    assert confidence.level == "unknown" and "fitted for" in confidence.reason and ONE_STEP in confidence.reason


@pytest.mark.parametrize("template", TemplateCatalog().names())
def test_a_new_kb_of_every_template_says_the_one_step(tmp_path: Path, template: str) -> None:
    root = tmp_path / "kb"
    init_kb(root, name="calibrate", template=template)
    manifest = (root / "pinakes.toml").read_text(encoding="utf-8")
    if "[retrieval.confidence]" in manifest:
        assert ONE_STEP in manifest and "`pnk eval --fit-confidence`," not in manifest
    remedy = {check.name: check for check in run_checks(DoctorContext(root))}["manifest.confidence"].remedy
    assert ONE_STEP in (remedy or "")


@pytest.mark.parametrize("name", TemplateCatalog().names())
def test_a_kb_stamped_from_version_2_upgrades_to_the_comment_naming_the_one_step(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Version 3 of each template changed only the calibration comment: `pnk upgrade` of a version 2
    KB reports no key changed and `--apply` records the installed version, the KB's comments kept
    as it was stamped (comments are not keys; templates/README.md)."""
    from pinakes.cli import main
    from tests.test_upgrade import stamp_from_archive

    kb = stamp_from_archive(tmp_path / "kb", name, "2")
    manifest = kb / "pinakes.toml"
    stamped = manifest.read_text(encoding="utf-8")
    assert "`pnk eval --fit-confidence`, then uncomment" in stamped and f'template = "{name}@2"' in stamped
    installed = TemplateCatalog().get(name).ref
    assert main(["-C", str(kb), "upgrade"]) == 0
    out = capsys.readouterr().out
    # Later versions change keys of their own (version 5: `[sources]` include and types for the
    # document formats; version 6, 5 of notes and code-docs: `[retrieval] vector_tier` "auto"); the
    # calibration comment is never one of the changes.
    hunks = re.findall(r"^@@ \[(.+?)\] (\w+) @@", out, flags=re.MULTILINE)
    assert set(hunks) <= {("sources", "include"), ("sources", "types"), ("retrieval", "vector_tier"),
                          ("kb", "template")}, out
    assert main(["-C", str(kb), "upgrade", "--apply"]) == 0
    upgraded = manifest.read_text(encoding="utf-8")
    assert f'template = "{installed}"' in upgraded
    assert "`pnk eval --fit-confidence`, then uncomment" in upgraded and ONE_STEP not in upgraded
    changed = ("include = ", "types = ", "template = ", "vector_tier = ")
    assert ([line for line in upgraded.splitlines() if not line.startswith(changed)]
            == [line for line in stamped.splitlines() if not line.startswith(changed)])
