"""`pnk link` / `pnk unlink` change only the bytes of the `links` key (spec §2.2, issue #24 item 8):
an escape stays escaped, a flow list keeps its spacing, the byte-order mark, CRLF line ends,
comments and the author's indentation of other keys stay, and link then unlink gives back the
original file byte for byte. Driven through the CLI on a copy of the demo KB."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pinakes.cli import main
from pinakes.sidecar import read_sidecar
from tests.test_links_helpers import DEMO_ID, DEMO_OUTGOING, PARTNER_BORROWING, PARTNER_ID, copy_kbs

SOURCE = "docs/loans/outgoing.md"
COURIERS = "docs/loans/couriers.md"


def _hostile(links_block: str) -> str:
    return ("# written by a person, not by pnk\n"
            f"id: {DEMO_OUTGOING}\n"
            'title: "Caf\\u00e9 loans \\u2014 outgoing"   # escaped on purpose\n'
            'tags: [ a,  "b" ,c ]\n'
            f"{links_block}"
            "owner:\n"
            "    name:   'Jos\\u00e9'\n"
            "    roles:\n"
            "      -   keeper\n"
            "notes: |\n"
            "    kept as written\n"
            "# the last word\n")


def _write(kb: Path, text: str, *, bom: bool, crlf: bool) -> bytes:
    data = (b"\xef\xbb\xbf" if bom else b"") + (text.replace("\n", "\r\n") if crlf else text).encode("utf-8")
    (kb / (SOURCE + ".pnk.yaml")).write_bytes(data)
    return data


def _pnk(kb: Path, *args: str) -> None:
    assert main(["-C", str(kb), *args]) == 0


def _outside_links(data: bytes) -> tuple[bytes, bytes]:
    """The bytes before the `links:` key and from the next top-level key on."""
    match = re.search(rb"^links:.*?(?=^\w)", data, re.MULTILINE | re.DOTALL)
    assert match is not None, data
    return data[: match.start()], data[match.end():]


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    return copy_kbs(tmp_path)[0]


@pytest.mark.parametrize(("bom", "crlf"), [(False, False), (True, True), (True, False), (False, True)])
def test_link_then_unlink_touches_only_links_and_restores_every_byte(demo: Path, bom: bool, crlf: bool) -> None:
    original = _write(demo, _hostile("links: []\n"), bom=bom, crlf=crlf)
    _pnk(demo, "link", SOURCE, f"partner:{PARTNER_BORROWING}", "--rel", "cites")
    linked = (demo / (SOURCE + ".pnk.yaml")).read_bytes()
    assert linked != original
    assert _outside_links(linked) == _outside_links(original)
    assert b'"Caf\\u00e9 loans \\u2014 outgoing"' in linked and b'tags: [ a,  "b" ,c ]' in linked
    sidecar = read_sidecar(demo / (SOURCE + ".pnk.yaml"), kb_id=DEMO_ID)
    assert [(link.kb_id, link.doc_id, link.rel) for link in sidecar.links] == [(PARTNER_ID, PARTNER_BORROWING, "cites")]
    assert sidecar.title == "Café loans — outgoing" and sidecar.tags == ("a", "b", "c")
    _pnk(demo, "unlink", SOURCE, f"partner:{PARTNER_BORROWING}")
    assert (demo / (SOURCE + ".pnk.yaml")).read_bytes() == original


def test_a_block_list_with_comments_keeps_them_and_the_rest_of_the_file(demo: Path) -> None:
    links = ("links:\n"
             f"  - target: pnk://{DEMO_ID}/{_couriers_id(demo)}   # the courier rules\n"
             "    rel: see-also\n"
             "  # the next one came from the partner's lending policy\n"
             f"  - target: \"pnk://{PARTNER_ID}/{PARTNER_BORROWING}\"\n"
             "    rel: 'lender-policy'\n")
    original = _write(demo, _hostile(links), bom=True, crlf=True)
    _pnk(demo, "link", SOURCE, f"partner:{PARTNER_BORROWING}", "--rel", "partner-procedure")
    linked = (demo / (SOURCE + ".pnk.yaml")).read_bytes()
    assert _outside_links(linked) == _outside_links(original)
    assert b"# the courier rules" in linked and b"# the next one came from" in linked
    assert b"rel: 'lender-policy'" in linked  # an item that stays keeps its quoting
    _pnk(demo, "unlink", SOURCE, f"partner:{PARTNER_BORROWING}", "--rel", "partner-procedure")
    assert (demo / (SOURCE + ".pnk.yaml")).read_bytes() == original


def test_a_sidecar_without_a_links_key_gains_only_that_key(demo: Path) -> None:
    text = _hostile("")
    original = _write(demo, text, bom=False, crlf=True)
    _pnk(demo, "link", SOURCE, COURIERS, "--rel", "see-also")
    linked = (demo / (SOURCE + ".pnk.yaml")).read_bytes()
    start = linked.index(b"links:")
    end = linked.index(b"owner:")
    assert linked[:start] + linked[end:] == original  # the key was inserted, nothing else moved
    assert linked[start:end].endswith(b"\r\n") and b"\n" not in linked[start:end].replace(b"\r\n", b"")


def _couriers_id(demo: Path) -> str:
    return read_sidecar(demo / (COURIERS + ".pnk.yaml"), kb_id=DEMO_ID).id
