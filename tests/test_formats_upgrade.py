"""The document formats reach a KB made before them only when its owner says so (issue #43): without a
`[sources] types` line a KB indexes markdown, text, code and pdf as it always did, skips its HTML,
EPUB, DOCX and ODT files with a reason, and `pnk status` and `pnk doctor` say how to index them;
`pnk init` (template version 5) writes the line with every type but image (OCR is opt-in: said by
status and doctor, never warned about), and `pnk upgrade --apply` brings it to an older KB."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import cast

import pytest

from pinakes.cli import main
from pinakes.extract.source_types import DEFAULT_SOURCE_TYPES, MARKDOWN_WRITTEN
from pinakes.init import init_kb
from pinakes.manifest import InvalidManifestError, load_manifest
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.conftest import REPO_ROOT
from tests.format_files import docx_bytes, w_p
from tests.test_formats_hostile import index_every_type
from tests.test_serve_helpers import manifest_fake_embedder

pytest.importorskip("selectolax")
pytest.importorskip("defusedxml")

# What `pnk init` (template version 5) writes: every type but image, whose OCR is opt-in.
INIT_TYPES = DEFAULT_SOURCE_TYPES + MARKDOWN_WRITTEN


def older_kb(root: Path) -> Path:
    """A KB as `pnk init` made it before the document formats: the default template's version 3."""
    init_kb(root, name="harbour")
    current = (root / "pinakes.toml").read_text(encoding="utf-8")
    values = {key: cast("re.Match[str]", re.search(rf'^{key} = "?([^"\n]*)"?$', current, re.M)).group(1)
              for key in ("name", "id")}
    values["embedding_provider"] = cast("re.Match[str]", re.search(r'^provider = "([^"]*)"', current, re.M)).group(1)
    old = (REPO_ROOT / "templates" / "archive" / "default" / "3" / "pinakes.toml").read_text(encoding="utf-8")
    old = (old.replace("${name}", json.dumps(values["name"])).replace("${kb_id}", values["id"])
           .replace("${template}", "default@3").replace("${embedding_provider}", values["embedding_provider"]))
    (root / "pinakes.toml").write_text(old, encoding="utf-8")
    docs = root / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "note.md").write_text("# Moorings\n\nEvery mooring is inspected in April.\n", encoding="utf-8")
    (docs / "tides.html").write_text("<main><h1>Tides</h1><p>Spring tides reach six metres.</p></main>",
                                     encoding="utf-8")
    (docs / "report.docx").write_bytes(docx_bytes(w_p("The slipway was resurfaced.")))
    return root


def indexed_paths(root: Path) -> set[str]:
    import sqlite3

    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        return {path for (path,) in conn.execute("SELECT path FROM documents WHERE state = 'active'")}
    finally:
        conn.close()


def test_a_kb_without_types_keeps_its_types_and_is_told_what_it_skips(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    root = older_kb(tmp_path / "kb")
    assert load_manifest(root / "pinakes.toml").sources.types == DEFAULT_SOURCE_TYPES
    report = run_sync(root, SyncOptions(), embedder=manifest_fake_embedder(root))
    assert report.ok and indexed_paths(root) == {"docs/note.md"}
    assert ("docs/tides.html", "html is not in [sources] types") in report.skipped
    assert ("docs/report.docx", "docx is not in [sources] types") in report.skipped

    assert main(["-C", str(root), "status"]) == 0
    out = capsys.readouterr().out
    assert "2 files (docx 1, html 1) can now be indexed, but [sources] types leaves their types out" in out
    assert 'set `types = ["markdown", "text", "code", "pdf", "docx", "html"]` under [sources]' in out

    main(["-C", str(root), "doctor", "--json"])
    checks = [check for check in json.loads(capsys.readouterr().out)["checks"] if check["name"] == "document formats"]
    assert [check["status"] for check in checks] == ["WARN"]
    assert "can now be indexed" in checks[0]["detail"] and "pnk sync" in checks[0]["remedy"]

    index_every_type(root)  # what the owner writes, as the notice says
    report = run_sync(root, SyncOptions(), embedder=manifest_fake_embedder(root))
    assert report.ok and indexed_paths(root) == {"docs/note.md", "docs/tides.html", "docs/report.docx"}


def test_pnk_upgrade_apply_writes_the_types_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = older_kb(tmp_path / "kb")
    assert main(["-C", str(root), "upgrade"]) == 0
    assert "types" in capsys.readouterr().out
    assert main(["-C", str(root), "upgrade", "--apply"]) == 0
    assert load_manifest(root / "pinakes.toml").sources.types == INIT_TYPES


def test_pnk_init_indexes_every_type_and_says_images_can_be_read_by_ocr(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "kb"
    init_kb(root, name="fresh")
    assert load_manifest(root / "pinakes.toml").sources.types == INIT_TYPES
    (root / "docs").mkdir(exist_ok=True)
    (root / "docs" / "diagram.png").write_bytes(b"\x89PNG\r\n\x1a\n")  # a docs folder's figure: OCR is opt-in
    assert main(["-C", str(root), "status"]) == 0
    out = capsys.readouterr().out
    assert "1 file (image 1) can now be indexed" in out and "the [ocr] extra" in out
    main(["-C", str(root), "doctor", "--json"])
    checks = [check for check in json.loads(capsys.readouterr().out)["checks"] if check["name"] == "document formats"]
    assert [check["status"] for check in checks] == ["OK"]  # a choice `pnk init` made: said, not warned
    assert '"odt", "image"]' in checks[0]["remedy"]


@pytest.mark.parametrize(("line", "problem"), [
    ('types = ["pdf", "rtf"]', "names 'rtf', not a source type"),
    ("types = []", "is empty: no file would ever be a source"),
])
def test_types_names_only_source_types(tmp_path: Path, line: str, problem: str) -> None:
    init_kb(tmp_path / "kb", name="fresh")
    manifest = tmp_path / "kb" / "pinakes.toml"
    text = re.sub(r"^types = .*\n", "", manifest.read_text(encoding="utf-8"), flags=re.M)
    manifest.write_text(text.replace("[sources]\n", f"[sources]\n{line}\n", 1), encoding="utf-8")
    with pytest.raises(InvalidManifestError, match=re.escape(problem)):
        load_manifest(manifest)
