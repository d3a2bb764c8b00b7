"""`pnk link` / `pnk unlink` / `pnk link --add-kb`: one sidecar written, every other byte kept, every
refusal naming what is wrong; and the Done-when round trip: links authored in both directions by
`pnk link`, each KB then lists the other's inbound links."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinakes.cli import main
from pinakes.errors import ManifestError, UsageError
from pinakes.links import authoring
from pinakes.manifest import load_manifest
from pinakes.sidecar import read_sidecar
from tests.test_links_helpers import (
    ABSENT_DOC,
    DEMO_ID,
    PARTNER_ID,
    copy_kbs,
    inbound,
    sync,
)

GOVERNANCE = "docs/governance/about.md"  # demo: no links of its own
EXHIBITIONS = "docs/about.md"  # partner: no links of its own


@pytest.fixture
def kbs(tmp_path: Path) -> tuple[Path, Path]:
    return copy_kbs(tmp_path)


def _files(root: Path) -> dict[str, bytes]:
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def test_link_writes_only_the_sources_sidecar_and_keeps_its_other_bytes(kbs: tuple[Path, Path],
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    demo, partner = kbs
    sidecar = demo / "docs/loans/outgoing.md.pnk.yaml"
    sidecar.write_text(sidecar.read_text(encoding="utf-8").replace("provenance:", "# kept comment\nprovenance:"),
                       encoding="utf-8")
    before_demo, before_partner = _files(demo), _files(partner)
    assert main(["-C", str(demo), "link", "docs/loans/outgoing.md", f"partner:{EXHIBITIONS}", "--rel", "cites"]) == 0
    assert "linked docs/loans/outgoing.md" in capsys.readouterr().out
    after_demo = _files(demo)
    changed = {path for path in after_demo if after_demo[path] != before_demo.get(path)}
    assert changed == {"docs/loans/outgoing.md.pnk.yaml"}
    assert _files(partner) == before_partner  # never a file of the KB linked to
    old, new = before_demo["docs/loans/outgoing.md.pnk.yaml"].decode(), after_demo["docs/loans/outgoing.md.pnk.yaml"].decode()
    partner_about = read_sidecar(partner / f"{EXHIBITIONS}.pnk.yaml", kb_id=PARTNER_ID).id
    # the new entry is the only addition, by ULID; the self link is written out by design (spec §2.2)
    assert new.replace(f"  - target: pnk://{PARTNER_ID}/{partner_about}\n    rel: cites\n", "") == \
        old.replace("pnk://self/", f"pnk://{DEMO_ID}/")
    assert "# kept comment" in new


def test_links_authored_both_ways_are_each_kbs_inbound_links_after_sync(kbs: tuple[Path, Path]) -> None:
    demo, partner = kbs
    demo_about = authoring.link(demo, GOVERNANCE, f"partner:{EXHIBITIONS}", "cites")
    partner_about = authoring.link(partner, EXHIBITIONS, f"archive:{GOVERNANCE}", "cited-by")
    assert demo_about.changed and partner_about.changed
    sync(demo)
    sync(partner)
    sync(demo, scan_links=True)
    assert (PARTNER_ID, partner_about.source.doc_id, demo_about.source.doc_id, "cited-by") in inbound(demo)
    assert (DEMO_ID, demo_about.source.doc_id, partner_about.source.doc_id, "cites") in inbound(partner)


def test_aliases_uris_and_ulids_all_resolve_to_ulids(kbs: tuple[Path, Path]) -> None:
    demo, partner = kbs
    target_id = read_sidecar(partner / f"{EXHIBITIONS}.pnk.yaml", kb_id=PARTNER_ID).id
    own_id = read_sidecar(demo / "docs/loans/couriers.md.pnk.yaml", kb_id=DEMO_ID).id
    for target, rel in ((f"pnk://partner/{target_id}", "a"), (f"partner:{target_id}", "b"),
                        (f"pnk://{PARTNER_ID}/{target_id}", "c"), (str(partner / EXHIBITIONS), "d"), (own_id, "e"),
                        (f"self:{own_id}", "f")):
        authoring.link(demo, GOVERNANCE, target, rel)
    links = read_sidecar(demo / f"{GOVERNANCE}.pnk.yaml", kb_id=DEMO_ID).links
    assert [(link.kb_id, link.doc_id, link.rel) for link in links] == [
        *((PARTNER_ID, target_id, rel) for rel in "abcd"), *((DEMO_ID, own_id, rel) for rel in "ef")]
    text = (demo / f"{GOVERNANCE}.pnk.yaml").read_text(encoding="utf-8")
    assert "partner" not in text.replace("partnership", "")  # an alias never reaches the file


@pytest.mark.parametrize(("source", "target", "says"), [
    (GOVERNANCE, GOVERNANCE, "same document"),
    (GOVERNANCE, f"elsewhere:{EXHIBITIONS}", "not a known KB alias"),
    (GOVERNANCE, f"partner:{ABSENT_DOC}", f"no document {ABSENT_DOC}"),
    (GOVERNANCE, f"pnk://{PARTNER_ID}/{ABSENT_DOC}", f"no document {ABSENT_DOC}"),
    (GOVERNANCE, "partner:docs/nowhere.md", "no document at"),
    (f"partner:{EXHIBITIONS}", GOVERNANCE, "not of this KB"),
])
def test_refusals_name_what_is_wrong_and_write_nothing(kbs: tuple[Path, Path], source: str, target: str,
                                                       says: str) -> None:
    demo, partner = kbs
    before = _files(demo), _files(partner)
    with pytest.raises(UsageError, match=says) as refused:
        authoring.link(demo, source, target, "cites")
    assert refused.value.remedy
    assert (_files(demo), _files(partner)) == before


def test_an_unknown_alias_lists_the_known_ones(kbs: tuple[Path, Path]) -> None:
    demo, _ = kbs
    with pytest.raises(UsageError) as refused:
        authoring.link(demo, GOVERNANCE, "elsewhere:docs/x.md", "cites")
    assert "partner" in (refused.value.remedy or "") and "self" in (refused.value.remedy or "")


def test_unlink_removes_the_link_and_refuses_one_that_is_not_there(kbs: tuple[Path, Path],
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    demo, _ = kbs
    original = (demo / f"{GOVERNANCE}.pnk.yaml").read_bytes()
    authoring.link(demo, GOVERNANCE, f"partner:{EXHIBITIONS}", "cites")
    assert main(["-C", str(demo), "unlink", GOVERNANCE, f"partner:{EXHIBITIONS}", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rels"] == ["cites"]
    assert read_sidecar(demo / f"{GOVERNANCE}.pnk.yaml", kb_id=DEMO_ID).links == ()
    assert (demo / f"{GOVERNANCE}.pnk.yaml").read_bytes().replace(b"links: []\n", b"") == \
        original.replace(b"links: []\n", b"")
    with pytest.raises(UsageError, match="has no link to"):
        authoring.unlink(demo, GOVERNANCE, f"partner:{EXHIBITIONS}")
    # a target that no longer exists anywhere can still be unlinked by its id
    authoring.link(demo, GOVERNANCE, f"partner:{EXHIBITIONS}", "cites")
    gone = read_sidecar(demo / f"{GOVERNANCE}.pnk.yaml", kb_id=DEMO_ID).links[0]
    assert authoring.unlink(demo, GOVERNANCE, f"pnk://partner/{gone.doc_id}", "cites").changed


def test_add_kb_appends_one_table_and_keeps_every_byte(kbs: tuple[Path, Path], tmp_path: Path) -> None:
    demo, partner = kbs
    manifest = partner / "pinakes.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8").split("[[links.kb]]")[0].rstrip() + "\n",
                        encoding="utf-8")
    before = manifest.read_bytes()
    added = authoring.add_kb(partner, "records", str(demo))
    after = manifest.read_bytes()
    assert after.startswith(before)
    assert after[len(before):].decode() == (f'\n[[links.kb]]\nid = "{DEMO_ID}"\nalias = "records"\n'
                                            'path = "../demo-kb"\n')
    linked = load_manifest(manifest).link("records")
    assert linked is not None
    assert linked.id == DEMO_ID
    assert added.kb_id == DEMO_ID
    with pytest.raises(UsageError, match="already linked"):
        authoring.add_kb(partner, "again", str(demo))
    with pytest.raises(UsageError, match="already used"):
        authoring.add_kb(demo, "partner", str(partner))
    with pytest.raises(UsageError, match="cannot be a KB alias"):
        authoring.add_kb(partner, "self", str(demo))
    with pytest.raises(UsageError, match=r"no pinakes\.toml"):
        authoring.add_kb(partner, "nowhere", str(tmp_path / "nowhere"))
    assert manifest.read_bytes() == after


def test_add_kb_writes_nothing_into_a_manifest_that_does_not_load(kbs: tuple[Path, Path]) -> None:
    demo, partner = kbs
    manifest = demo / "pinakes.toml"
    text = manifest.read_text(encoding="utf-8").split("[[links.kb]]")[0]
    manifest.write_text(text + '[links]\nkb = "not an array"\n', encoding="utf-8")
    before = manifest.read_bytes()
    with pytest.raises(ManifestError):
        authoring.add_kb(demo, "museum", str(partner))
    assert manifest.read_bytes() == before
