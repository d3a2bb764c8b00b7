"""A minted sidecar is written and read without ruamel.yaml (sidecar/minted.py): its bytes are what
ruamel's canonical dump writes, and what it reads is what the strict reader reads; anything that
is not exactly that form still goes through the strict reader, refusals included."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from pinakes.errors import SidecarError
from pinakes.ids import new_ulid
from pinakes.sidecar import read_sidecar, write_new_sidecar
from pinakes.sidecar.layout import Layout, dump_bytes
from pinakes.sidecar.minted import minted_bytes, parse_minted
from pinakes.sidecar.reading import interpret, load_source, parse_sidecar_bytes
from pinakes.sidecar.reconcile import set_style


def _ruamel_minted(doc_id: str) -> bytes:
    document = CommentedMap()
    document["id"] = doc_id
    document["tags"] = set_style(CommentedSeq([]), flow=True)
    document["links"] = CommentedSeq()
    return dump_bytes(document, Layout())


def test_minted_bytes_and_reading_equal_ruamels_dump_and_the_strict_reader(tmp_path: Path) -> None:
    for _ in range(50):
        doc_id = new_ulid()
        data = minted_bytes(doc_id)
        assert data is not None and data == _ruamel_minted(doc_id)
        strict = interpret(load_source(data, tmp_path / "a.md.pnk.yaml"), "kb")
        assert parse_minted(data, tmp_path / "a.md.pnk.yaml") == strict


def test_a_sync_mints_through_the_fast_form_and_reads_it_back(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    doc.write_text("# A\n", encoding="utf-8")
    doc_id = new_ulid()
    written = write_new_sidecar(doc, doc_id=doc_id)
    assert written.read_bytes() == _ruamel_minted(doc_id)
    assert read_sidecar(written, kb_id="kb").id == doc_id


@pytest.mark.parametrize("variant", [
    b"id: {id}\r\ntags: []\r\nlinks: []\r\n",          # CRLF
    b"\xef\xbb\xbfid: {id}\ntags: []\nlinks: []\n",    # a BOM
    b"id: {id}\ntags: []\nlinks: []\n# mine\n",        # a comment
    b"id:  {id}\ntags: []\nlinks: []\n",               # other spacing
    b"id: {id}\ntags: [x]\nlinks: []\n",               # a tag
])
def test_anything_but_the_exact_form_goes_through_the_strict_reader(tmp_path: Path, variant: bytes) -> None:
    doc_id = new_ulid()
    data = variant.replace(b"{id}", doc_id.encode())
    assert parse_minted(data, tmp_path / "a.pnk.yaml") is None
    assert parse_sidecar_bytes(data, path=tmp_path / "a.pnk.yaml", kb_id="kb").id == doc_id


def test_an_id_yaml_reads_as_a_number_is_refused_as_before(tmp_path: Path) -> None:
    """26 digits (with at most one E) are a number under YAML 1.2, never an id: not the fast form."""
    for number in ("01234567890123456789012345", "0123456789012345678901E345"):
        data = f"id: {number}\ntags: []\nlinks: []\n".encode()
        assert minted_bytes(number) is None and parse_minted(data, tmp_path / "a.pnk.yaml") is None
        with pytest.raises(SidecarError, match="must be a ULID"):
            parse_sidecar_bytes(data, path=tmp_path / "a.pnk.yaml", kb_id="kb")


def test_an_id_past_128_bits_is_not_read_as_one(tmp_path: Path) -> None:
    data = b"id: 8ZZZZZZZZZZZZZZZZZZZZZZZZZ\ntags: []\nlinks: []\n"
    assert parse_minted(data, tmp_path / "a.pnk.yaml") is None
    with pytest.raises(SidecarError):
        parse_sidecar_bytes(data, path=tmp_path / "a.pnk.yaml", kb_id="kb")
