"""`pnk status` and the MCP server's `pinakes_status` say the vector tier and the vector file's state
(review9 F8): none (the exact tier), current (rows, pieces, bytes), or why search answers exactly
instead (stale, damaged, missing) with the remedy, judged as a searching process judges the file
(vectors/freshness.py) from its footer and the key the last sync recorded, never every byte.

The threshold and the pieces are made small as in tests/test_vector_pieces.py; KBs are built by the
real sync.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

import pinakes.embed
from pinakes.cli import main
from pinakes.kb import KBPaths
from pinakes.vectors import build as vector_build
from pinakes.vectors import fileformat, vector_file_path
from pinakes.vectors.fileformat import read_header
from tests.kb_helpers import sync
from tests.test_serve_helpers import call_tool
from tests.test_vector_tier_search import auto_tier, build_auto_kb
from tests.test_vectors_file import ClusteredEmbedder, flip_byte

if importlib.util.find_spec("usearch") is None:
    pytest.skip("usearch is not installed", allow_module_level=True)


def kb_in_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, ClusteredEmbedder]:
    """A KB of 30 documents whose vector file the sync built in pieces of 50 rows."""
    monkeypatch.setattr(vector_build, "ANN_MIN_ROWS", 0)
    monkeypatch.setattr(vector_build, "PIECE_ROWS", 50)
    embedder = ClusteredEmbedder()

    def load_for_kb(*_args: object, **_kwargs: object) -> ClusteredEmbedder:
        return embedder

    monkeypatch.setattr(pinakes.embed, "load_for_kb", load_for_kb)
    root = tmp_path / "kb"
    build_auto_kb(root, 30, embedder)
    return root, embedder


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, ClusteredEmbedder]:
    return kb_in_pieces(tmp_path, monkeypatch)


def status(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], str]:
    """(`pnk status --json`, `pnk status`)."""
    assert main(["-C", str(root), "status", "--json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert main(["-C", str(root), "status"]) == 0
    return as_json, capsys.readouterr().out


def test_status_says_the_file_is_current_with_its_rows_pieces_and_size_without_reading_every_byte(
        kb: tuple[Path, ClusteredEmbedder], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    root, _embedder = kb
    path = vector_file_path(KBPaths(root).state_dir)
    header = read_header(path)

    def every_byte(*_args: object) -> str:
        raise AssertionError("status read the vector file's every byte")

    monkeypatch.setattr(fileformat, "_body_digest", every_byte)
    as_json, text = status(root, capsys)
    assert as_json["vector_file"] == {
        "tier": "approximate", "state": "current", "detail": as_json["vector_file"]["detail"],
        "remedy": None, "rows": header.rows, "pieces": len(header.pieces), "file_bytes": path.stat().st_size}
    assert len(header.pieces) > 1 and as_json["up_to_date"] is True
    assert re.search(rf"vector search: approximate, vector file current \({header.rows} rows in {len(header.pieces)} "
                     r"pieces, [\d.]+ MB; .*not every byte: `pnk doctor`", text), text


def test_a_format_1_file_after_an_upgrade_is_stale_until_the_next_sync(
        kb: tuple[Path, ClusteredEmbedder], capsys: pytest.CaptureFixture[str]) -> None:
    from tests.test_vector_pieces import as_format_1

    root, embedder = kb
    as_format_1(vector_file_path(KBPaths(root).state_dir))
    as_json, text = status(root, capsys)
    vector_file = as_json["vector_file"]
    assert isinstance(vector_file, dict)
    assert (vector_file["tier"], vector_file["state"]) == ("approximate", "stale")
    assert "format 1" in vector_file["detail"] and "pnk sync" in vector_file["remedy"]
    assert as_json["up_to_date"] is False  # the next sync has the file to rebuild
    assert re.search(r"vector search: exact .* until the vector file is fixed: stale \(vectors.ann is format 1 .*\); "
                     r"pnk sync", text), text
    assert "nothing for `pnk sync` to do" not in text and "run `pnk sync` to apply this" in text

    sync(root, embedder)
    as_json, _ = status(root, capsys)
    assert as_json["vector_file"]["state"] == "current" and as_json["up_to_date"] is True


@pytest.mark.parametrize("fault", ["footer", "deleted"])
def test_a_damaged_or_missing_file_is_named_with_its_remedy(
        kb: tuple[Path, ClusteredEmbedder], capsys: pytest.CaptureFixture[str], fault: str) -> None:
    root, embedder = kb
    path = vector_file_path(KBPaths(root).state_dir)
    if fault == "footer":
        flip_byte(path, path.stat().st_size - fileformat.FOOTER_BYTES + 30)
    else:
        path.unlink()
    as_json, text = status(root, capsys)
    vector_file = as_json["vector_file"]
    assert isinstance(vector_file, dict)
    expected = {"footer": ("damaged", "pnk sync rebuilds it"), "deleted": ("missing", "pnk sync builds it")}[fault]
    assert (vector_file["state"], vector_file["remedy"]) == expected
    assert f"until the vector file is fixed: {expected[0]} (" in text and expected[1] in text
    sync(root, embedder)  # the remedy works
    assert status(root, capsys)[0]["vector_file"]["state"] == "current"


def test_the_exact_tier_has_no_file_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    embedder = ClusteredEmbedder()

    def load_for_kb(*_args: object, **_kwargs: object) -> ClusteredEmbedder:
        return embedder

    monkeypatch.setattr(pinakes.embed, "load_for_kb", load_for_kb)
    root = tmp_path / "kb"
    build_auto_kb(root, 5, embedder)  # below the threshold (100,000 vectors)
    as_json, text = status(root, capsys)
    assert as_json["vector_file"] == {"tier": "exact", "state": "none", "detail": as_json["vector_file"]["detail"],
                                      "remedy": None, "rows": 0, "pieces": 0, "file_bytes": 0}
    assert "vector search: exact, no vector file (the index holds too few vectors for one" in text
    assert as_json["up_to_date"] is True

    manifest = root / "pinakes.toml"
    manifest.write_text(manifest.read_text().replace('vector_tier = "auto"', 'vector_tier = "numpy"'))
    as_json, text = status(root, capsys)
    assert as_json["vector_file"]["state"] == "none" and 'vector_tier = "numpy"' in text
    auto_tier(root)


def test_the_mcp_servers_status_says_the_same(kb: tuple[Path, ClusteredEmbedder],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from tests.test_serve_tools import serve

    root, _embedder = kb
    from tests.test_vector_pieces import as_format_1

    for stale in (False, True):
        if stale:
            as_format_1(vector_file_path(KBPaths(root).state_dir))
        served = serve(root)
        try:
            answered = call_tool(served, "pinakes_status", {})
        finally:
            served.close()
        assert answered["vector_file"] == status(root, capsys)[0]["vector_file"]
        assert answered["vector_file"]["state"] == ("stale" if stale else "current")
        assert answered["fresh"] is not stale and (answered["next_step"] is None) is not stale
