"""Vectors addressed by (model identity, embedded text) (issue #29, pipeline/vector_reuse.py):
what a sync already holds a vector for is not embedded again, through the product's own sync."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pinakes.embed.base import Embedder
from pinakes.embed.deferred import DeferredEmbedder
from pinakes.kb import KBPaths
from tests.conftest import REPO_ROOT
from tests.fakes import HashEmbedder, VectorTableEmbedder, substitute_embedder
from tests.kb_helpers import Doc, build_kb, older_extractor, sync, text_pdf, write_documents

PARAGRAPHS = 120  # one chunk each at max_tokens=40: past EMBED_SLICE_CHUNKS, so the document streams


def paragraph(number: int, edited: bool = False) -> str:
    words = " ".join(f"w{number}x{k}" for k in range(25))
    return f"Paragraph {number} {'was rewritten today' if edited else 'says'}: {words}."


def long_document(edited: int | None = None) -> str:
    body = "\n\n".join(paragraph(n, edited=n == edited) for n in range(PARAGRAPHS))
    return f"# Manual\n\n{body}\n"


def small_docs() -> list[Doc]:
    return [Doc(f"docs/notes/n{k}.md", f"# Note {k}\n\nNote {k} is about topic t{k} and t{k + 1}.\n")
            for k in range(6)]


class Recording(VectorTableEmbedder):
    """HashEmbedder vectors; remembers every text the sync asked the model for."""

    def __init__(self) -> None:
        super().__init__({"unused placeholder": [1.0] * 64}, model="test/hash-bow")


def never_loaded(model: Embedder) -> DeferredEmbedder:
    """`model`'s identity and tokenizer, with weights whose load fails the test: what the packaged
    model hands a sync (embed/deferred.py), minus the weights."""

    def load() -> Embedder:
        raise AssertionError("the model's weights were loaded")

    return DeferredEmbedder(model.identity, model.max_input_tokens, model.count_tokens,
                            model.count_tokens_batch, load)


def vector_rows(root: Path) -> list[tuple[str, int, str, bytes, bytes]]:
    conn = sqlite3.connect(KBPaths(root).index_db)
    try:
        return sorted(conn.execute(
            "SELECT d.path, c.ordinal, c.text, e.vector, e.text_key FROM embeddings e "
            "JOIN chunks c ON c.id = e.chunk_id JOIN documents d ON d.id = c.doc_id "
            "WHERE d.state = 'active'").fetchall())
    finally:
        conn.close()


def chunk_texts(root: Path, path: str) -> list[str]:
    return [row[2] for row in vector_rows(root) if row[0] == path]


def make_kb(root: Path, embedder: object) -> Path:
    build_kb(root, [Doc("docs/manual.md", long_document()), *small_docs()], embedder, max_tokens=40,
             overlap=0)
    return root


def test_a_kb_built_with_reuse_equals_one_built_without_byte_for_byte(tmp_path: Path) -> None:
    built: dict[str, list[tuple[str, int, str, bytes, bytes]]] = {}
    for name, no_reuse in (("with", False), ("without", True)):
        root = make_kb(tmp_path / name, HashEmbedder())
        (root / "docs/manual.md").write_text(long_document(edited=7), encoding="utf-8")
        shutil.copytree(root / "docs/notes", root / "docs/copy", ignore=shutil.ignore_patterns("*.pnk.yaml"))
        report = sync(root, HashEmbedder(), no_reuse=no_reuse)
        assert (report.chunks_reused > 0) is not no_reuse
        sync(root, HashEmbedder(), rebuild=True, no_reuse=no_reuse)
        built[name] = [(path, ordinal, text, vector, key) for path, ordinal, text, vector, key in vector_rows(root)]
    assert built["with"] == built["without"]
    assert all(key is not None and len(key) == 16 for *_, key in built["with"])


def test_one_edited_paragraph_embeds_only_the_chunks_whose_text_changed(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", HashEmbedder())
    before = set(chunk_texts(root, "docs/manual.md"))
    assert len(before) > 64
    (root / "docs/manual.md").write_text(long_document(edited=50), encoding="utf-8")
    model = Recording()
    report = sync(root, model)
    after = chunk_texts(root, "docs/manual.md")
    changed = [text for text in after if text not in before]
    assert report.changed == ["docs/manual.md"]
    assert 1 <= len(changed) <= 2
    # what the model was given is each changed chunk as embedded (embedding_text_of may add context)
    assert len(model.embedded) == len(changed)
    assert all(any(text in given for given in model.embedded) for text in changed)
    assert report.chunks_embedded == len(changed)
    assert report.chunks_reused == len(after) - len(changed)
    assert "chunks: 1 embedded" in report.render_text() or "chunks: 2 embedded" in report.render_text()
    assert report.to_dict()["chunks_reused"] == report.chunks_reused


def test_an_edit_looks_up_only_the_chunks_whose_rows_it_does_not_keep(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A kept row's vector stays where it is, so it is never looked up (the edit's cost follows the
    change), yet the report still counts it as reused."""
    from pinakes.pipeline.vector_reuse import VectorReuse

    root = make_kb(tmp_path / "kb", HashEmbedder())
    (root / "docs/manual.md").write_text(long_document(edited=50), encoding="utf-8")
    looked_up: list[bytes] = []
    lookup = VectorReuse._lookup  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose

    def recording(self: VectorReuse, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        looked_up.extend(keys)
        return lookup(self, keys)

    monkeypatch.setattr(VectorReuse, "_lookup", recording)
    report = sync(root, HashEmbedder())
    assert report.changed == ["docs/manual.md"]
    assert 1 <= len(looked_up) == report.chunks_embedded <= 2
    assert report.chunks_reused == len(chunk_texts(root, "docs/manual.md")) - report.chunks_embedded


def test_a_duplicated_folder_embeds_nothing_new(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", HashEmbedder())
    shutil.copytree(root / "docs/notes", root / "docs/copy", ignore=shutil.ignore_patterns("*.pnk.yaml"))
    report = sync(root, never_loaded(HashEmbedder()))
    assert len(report.added) == len(small_docs())
    assert report.chunks_embedded == 0 and report.chunks_reused >= len(small_docs())
    copies = [row for row in vector_rows(root) if row[0].startswith("docs/copy/")]
    originals = {(row[0].replace("docs/notes/", ""), row[1]): row[3:] for row in vector_rows(root)
                 if row[0].startswith("docs/notes/")}
    assert copies and all(originals[(row[0].replace("docs/copy/", ""), row[1])] == row[3:] for row in copies)


def test_a_rebuild_of_an_unchanged_kb_embeds_nothing_and_never_loads_the_weights(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", HashEmbedder())
    before = vector_rows(root)
    report = sync(root, never_loaded(HashEmbedder()), rebuild=True)
    assert report.chunks_embedded == 0 and report.chunks_reused == len(before)
    assert report.vector_reuse is not None and report.vector_reuse.startswith("reused vectors from the old index")
    assert "vectors: reused vectors from the old index" in report.render_text()
    assert vector_rows(root) == before


def test_a_rebuild_with_no_reuse_embeds_every_chunk(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", HashEmbedder())
    before = vector_rows(root)
    model = Recording()
    report = sync(root, model, rebuild=True, no_reuse=True)
    assert report.chunks_embedded == len({row[4] for row in before}) and report.chunks_reused == len(before) - report.chunks_embedded
    assert len(set(model.embedded)) == report.chunks_embedded
    assert "--no-reuse" in (report.vector_reuse or "")
    assert vector_rows(root) == before


def _unique_row(index: Path) -> tuple[int, bytes, bytes]:
    """(chunk_id, vector, text_key) of the first vector row whose text no other row shares: the one
    place a rebuild can find that text's vector."""
    conn = sqlite3.connect(index)
    try:
        return conn.execute("SELECT chunk_id, vector, text_key FROM embeddings WHERE text_key IN "
                            "(SELECT text_key FROM embeddings GROUP BY text_key HAVING count(*) = 1) "
                            "ORDER BY chunk_id LIMIT 1").fetchone()
    finally:
        conn.close()


def damage_vector(index: Path, damage: str) -> int:
    """Damage one stored vector with a plain sqlite3 UPDATE of its blob, as a flipped bit on disk or a
    writer outside Pinakes would leave it; returns its chunk id. The checksum is left as it was,
    except where `damage` says the row was written that way ("-stored": checksum of the bad bytes)."""
    from pinakes.index.vector_rows import row_checksum

    chunk_id, blob, key = _unique_row(index)
    vector = np.frombuffer(blob, dtype=np.float32).copy()
    component = int(np.flatnonzero(vector)[0])  # a component whose every bit means something
    raw = bytearray(vector.tobytes())
    if damage == "sign-bit":  # keeps the length exactly: no unit-length test can see it
        raw[4 * component + 3] ^= 0x80
    elif damage == "mantissa-bit":  # the lowest bit: the length moves by less than float32 rounding
        raw[4 * component] ^= 0x01
    elif damage == "exponent-bit":
        raw[4 * component + 3] ^= 0x40
    elif damage == "nan":
        raw[4 * component:4 * component + 4] = np.float32(np.nan).tobytes()
    elif damage == "wrong-dim":
        raw = raw[:len(raw) // 2]
    elif damage in ("zero-stored", "not-unit-stored"):
        raw = bytearray((vector * 0.0 if damage == "zero-stored" else vector * 0.5).astype(np.float32).tobytes())
    checksum_sql = ", checksum = ?" if damage.endswith("-stored") else ""
    params = (bytes(raw), row_checksum(bytes(raw), key)) if checksum_sql else (bytes(raw),)
    conn = sqlite3.connect(index)
    with conn:
        conn.execute(f"UPDATE embeddings SET vector = ?{checksum_sql} WHERE chunk_id = ?", (*params, chunk_id))
    conn.close()
    return chunk_id


def doctor_vectors(root: Path) -> tuple[str, str, str | None]:
    from pinakes.doctor import DoctorContext, run_checks

    check = {c.name: c for c in run_checks(DoctorContext(root))}["index vectors"]
    return check.status, check.detail, check.remedy


DAMAGES = ["sign-bit", "mantissa-bit", "exponent-bit", "nan", "wrong-dim", "zero-stored", "not-unit-stored"]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_vector_row_is_embedded_again_alone_and_the_report_says_so(tmp_path: Path, damage: str) -> None:
    """Issue #40 item 6: a flipped sign or low mantissa bit passed the unit-length check and was
    reused by `--rebuild` ("every vector row passed"). Each row now carries a checksum: any flip is
    caught, that one text is embedded again, every other vector is reused, and the report says so."""
    root = make_kb(tmp_path / "kb", HashEmbedder())
    before = vector_rows(root)
    index = KBPaths(root).index_db
    damage_vector(index, damage)
    status, detail, remedy = doctor_vectors(root)
    assert status == "FAIL" and "1 of" in detail and remedy is not None and "pnk sync --rebuild" in remedy
    model = Recording()
    report = sync(root, model, rebuild=True)
    assert report.chunks_embedded == 1 and len(model.embedded) == 1  # that text only
    assert report.chunks_reused == len(before) - 1 and report.vectors_rejected == 1
    text = report.render_text()
    assert "1 stored vector failed its check" in text and "reused vectors from the old index" in text
    assert vector_rows(root) == before  # the model's vector, not the damaged row
    assert doctor_vectors(root)[0] == "OK"


def test_a_flipped_bit_in_a_kept_row_is_not_kept_by_a_plain_sync(tmp_path: Path) -> None:
    """An edit keeps the document's unchanged rows as they are (pipeline/embed.py): a row whose
    vector fails its checksum is not one of them; its text is embedded again."""
    root = make_kb(tmp_path / "kb", HashEmbedder())
    index = KBPaths(root).index_db
    conn = sqlite3.connect(index)
    (chunk_id,) = conn.execute("SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id "
                               "WHERE d.path = 'docs/manual.md' AND c.ordinal = 5").fetchone()
    (blob,) = conn.execute("SELECT vector FROM embeddings WHERE chunk_id = ?", (chunk_id,)).fetchone()
    flipped = bytearray(blob)
    flipped[4 * int(np.flatnonzero(np.frombuffer(blob, dtype=np.float32))[0]) + 3] ^= 0x80
    with conn:
        conn.execute("UPDATE embeddings SET vector = ? WHERE chunk_id = ?", (bytes(flipped), chunk_id))
    conn.close()
    (root / "docs/manual.md").write_text(long_document(edited=40), encoding="utf-8")
    model = Recording()
    report = sync(root, model)
    assert report.vectors_rejected == 1 and len(model.embedded) == 2  # the edited paragraph and the flipped one
    clean = make_kb(tmp_path / "clean", HashEmbedder())
    (clean / "docs/manual.md").write_text(long_document(edited=40), encoding="utf-8")
    sync(clean, HashEmbedder(), no_reuse=True)
    assert vector_rows(root) == vector_rows(clean)


def test_switching_a_pdfs_extractor_with_unchanged_text_embeds_nothing(tmp_path: Path) -> None:
    """The free extractor in its previous version, then today's: a new extractor fingerprint (a new
    build key, the document re-extracted and re-chunked) that reads the same text."""
    pytest.importorskip("pypdfium2", reason="the [pdf] extra (pypdfium2) is not installed: no PDF is read")
    root = tmp_path / "kb"
    pdf = Doc("docs/report.pdf", text_pdf([["Revenue grew in the third quarter.", "Costs stayed flat."],
                                            ["The outlook is steady for next year."]]))
    with older_extractor("pypdfium2"):
        build_kb(root, [pdf, *small_docs()], HashEmbedder())
    before = vector_rows(root)
    report = sync(root, never_loaded(HashEmbedder()))
    assert report.reembedded == ["docs/report.pdf"]
    assert report.chunks_embedded == 0 and report.chunks_reused > 0
    assert vector_rows(root) == before


SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
from tests.fakes import HashEmbedder
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
report = run_sync({kb!r}, SyncOptions(), embedder=HashEmbedder())
sys.exit(0 if report.ok else 1)
"""


def run_sync_process(kb: Path, fault: str | None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "PNK_FAULT"}
    if fault:
        env["PNK_FAULT"] = fault
    return subprocess.run([sys.executable, "-c", SCRIPT.format(repo=str(REPO_ROOT), kb=str(kb))], env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.heavy  # two sync subprocesses
def test_a_kill_mid_group_loses_at_most_that_group(tmp_path: Path) -> None:
    roots = [make_kb(tmp_path / name, HashEmbedder()) for name in ("killed", "clean")]
    for root in roots:
        (root / "docs/manual.md").write_text(long_document(edited=3), encoding="utf-8")
        for k in range(2):
            write_documents(root, [Doc(f"docs/notes/n{k}.md", f"# Note {k}\n\nRewritten note {k}.\n")])
    killed = run_sync_process(roots[0], "sync.mid-document-write")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    after_kill = vector_rows(roots[0])
    assert len(after_kill) > 0  # what earlier transactions committed is still there, keys included
    assert all(len(row[4]) == 16 for row in after_kill)
    assert run_sync_process(roots[0], None).returncode == 0
    sync(roots[1], HashEmbedder(), no_reuse=True)
    assert vector_rows(roots[0]) == vector_rows(roots[1])


@pytest.mark.heavy  # loads the packaged model once
def test_the_packaged_model_rebuilds_an_unchanged_kb_without_loading_its_weights(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No injected embedder: the sync takes the manifest's packaged model (fastembed, the default),
    and the local providers' loads are made to fail once the KB is built."""
    pytest.importorskip("fastembed", reason="the [light] extra (fastembed) is not installed: no packaged model")
    from pinakes.embed import provider_fastembed, provider_st
    from pinakes.init import init_kb
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    root = tmp_path / "kb"
    init_kb(root, name="packaged")
    write_documents(root, small_docs())
    first = run_sync(root, SyncOptions(quiet=True))
    assert first.ok and first.chunks_embedded > 0
    before = vector_rows(root)

    def refuse(*_args: object, **_kwargs: object) -> Embedder:
        raise AssertionError("the packaged model's weights were loaded")

    for provider in (provider_fastembed, provider_st):  # what the registry's entries load through
        monkeypatch.setattr(provider, "load", refuse)
    report = run_sync(root, SyncOptions(rebuild=True, quiet=True))
    assert report.ok and report.chunks_embedded == 0 and report.chunks_reused == len(before)
    assert vector_rows(root) == before


def test_a_rebuild_carries_a_paid_extractions_keys_with_its_vectors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The paid rows a rebuild copies from the old index (never re-extracted) keep their keys, so
    their vectors stay reusable afterwards."""
    pytest.importorskip("anthropic", reason="the [claude] extra is not installed: the paid path cannot run")
    pytest.importorskip("pypdfium2", reason="the [pdf] extra is not installed: nothing renders pages")
    from tests.fake_anthropic import FakeAnthropic, scanned_pdf
    from tests.paid_helpers import paid_kb
    from tests.paid_helpers import sync as pnk_sync

    def scan_rows(root: Path) -> list[tuple[str, int, str, bytes, bytes]]:
        return [row for row in vector_rows(root) if row[0] == "docs/scan.pdf"]

    with FakeAnthropic() as server:
        server.page_texts = {1: "The harbour ledger of 1888.", 2: "Tonnage landed at the quay."}
        root = paid_kb(tmp_path / "kb", monkeypatch, server, key="sk-ant-reuse-test-key", name="carry")
        (root / "docs/scan.pdf").write_bytes(scanned_pdf(2))
        assert pnk_sync(root, "--extract=claude-vision") == 0
        before = scan_rows(root)
        assert pnk_sync(root, "--rebuild") == 0
    assert before and scan_rows(root) == before  # keys included: none carried as NULL


def test_pnk_sync_reports_reuse_in_text_and_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from pinakes.cli import main
    from pinakes.init import init_kb
    from tests.fakes import FakeEmbedder

    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: FakeEmbedder())
    root = tmp_path / "kb"
    init_kb(root, name="cli")
    write_documents(root, small_docs())
    assert main(["-C", str(root), "sync", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["chunks_embedded"] > 0 and first["chunks_reused"] == 0
    assert main(["-C", str(root), "sync", "--rebuild", "--json"]) == 0
    rebuilt = json.loads(capsys.readouterr().out)
    assert rebuilt["chunks_embedded"] == 0 and rebuilt["chunks_reused"] == first["chunks_embedded"]
    assert rebuilt["vector_reuse"].startswith("reused vectors from the old index")
    assert main(["-C", str(root), "sync", "--rebuild", "--no-reuse"]) == 0
    text = capsys.readouterr().out
    assert f"chunks: {first['chunks_embedded']} embedded, 0 reused" in text
    assert "vectors: off (--no-reuse)" in text


def as_schema_8(index: Path) -> None:
    """What Pinakes before #40 wrote: the same tables, no checksum column, schema_version 8."""
    conn = sqlite3.connect(index)
    with conn:
        conn.execute("ALTER TABLE embeddings DROP COLUMN checksum")
        conn.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    conn.close()


def test_an_index_of_schema_8_asks_for_a_rebuild_which_reuses_its_vectors(tmp_path: Path) -> None:
    """The schema bump costs no embedding: `pnk sync` on an index of schema 8 refuses, naming
    `--rebuild`, and the rebuild reuses every vector (each judged without a checksum, as the report
    says) and writes a checksum for each."""
    from pinakes.errors import IndexSchemaError
    from pinakes.index.vector_rows import row_checksum
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    root = make_kb(tmp_path / "kb", HashEmbedder())
    before = vector_rows(root)
    index = KBPaths(root).index_db
    as_schema_8(index)
    with pytest.raises(IndexSchemaError) as raised:
        run_sync(root, SyncOptions(quiet=True), embedder=HashEmbedder())
    assert raised.value.remedy == "pnk sync --rebuild" and "schema_version 8" in raised.value.message
    report = sync(root, never_loaded(HashEmbedder()), rebuild=True)
    assert report.chunks_embedded == 0 and report.chunks_reused == len(before)
    assert report.vector_reuse is not None and report.vector_reuse.startswith("reused vectors from the old index")
    assert "schema 8" in report.vector_reuse and "cannot see a flipped sign bit" in report.vector_reuse
    assert vector_rows(root) == before
    conn = sqlite3.connect(index)
    rows = conn.execute("SELECT vector, text_key, checksum FROM embeddings").fetchall()
    conn.close()
    assert rows and all(checksum == row_checksum(vector, key) for vector, key, checksum in rows)


@pytest.mark.parametrize("bit", [30, 14])  # an exponent bit; a mantissa bit the old 1e-3 tolerance let through
def test_a_schema_8_row_with_a_flipped_bit_that_moves_its_length_is_embedded_again(tmp_path: Path, bit: int) -> None:
    root = make_kb(tmp_path / "kb", HashEmbedder())
    before = vector_rows(root)
    index = KBPaths(root).index_db
    chunk_id, blob, _key = _unique_row(index)
    values = np.frombuffer(blob, dtype=np.float32).copy()
    component = int(np.argmax(np.abs(values)))
    raw = values.view(np.uint32).copy()
    raw[component] ^= np.uint32(1 << bit)
    conn = sqlite3.connect(index)
    with conn:
        conn.execute("UPDATE embeddings SET vector = ? WHERE chunk_id = ?", (raw.tobytes(), chunk_id))
    conn.close()
    as_schema_8(index)
    model = Recording()
    report = sync(root, model, rebuild=True)
    assert report.chunks_embedded == 1 and report.vectors_rejected == 1 and len(model.embedded) == 1
    assert vector_rows(root) == before
