"""The reverse scan of a connected KB with many sidecars: what the freshness window buys.

    python bench/bench_reverse_scan.py [--sidecars 10000] [--rounds 3] [--inbound-every 10]

Builds, in a temporary directory, a partner KB of N one-line Markdown documents, each with a
sidecar holding one link (every `--inbound-every`-th into this KB, the rest to the partner itself),
and a small local KB synced with the fake embedder (tests/fakes.py: the scan never embeds). Then,
every figure as a median over the rounds, beside the baseline measured in the same run:

- baseline: the bare sidecar enumeration (`sources.walk.walk` over the partner's [sources], no
  hashing): the stat() cost any scan past the window pays;
- cold: a full scan (`--scan-links`): enumerate, read and parse every sidecar, replace the rows;
- past the window, nothing changed: enumerate and key the sidecars, read none, re-stamp;
- within the window: the due check alone (`kb_refs`, and the partner's signal: two stat() calls),
  which reads nothing of the partner.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def make_partner(root: Path, count: int, local_kb: str, local_docs: list[str], inbound_every: int) -> str:
    from pinakes.ids import new_ulid
    from pinakes.init import init_kb
    from pinakes.manifest import load_manifest

    init_kb(root, name="bench-partner")
    kb_id = load_manifest(root / "pinakes.toml").kb.id
    docs = root / "docs"
    for number in range(count):
        folder = docs / f"d{number // 500:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"n{number:05d}.md").write_text(f"# Note {number}\n", encoding="utf-8")
        if number % inbound_every == 0:
            target = f"pnk://{local_kb}/{local_docs[number % len(local_docs)]}"
        else:
            target = f"pnk://self/{new_ulid()}"
        (folder / f"n{number:05d}.md.pnk.yaml").write_text(
            f"id: {new_ulid()}\ntags: []\nlinks:\n  - target: {target}\n    rel: cites\n", encoding="utf-8")
    return kb_id


def make_local(root: Path, partner_root: Path, partner_id: str) -> None:
    from pinakes.init import init_kb
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync
    from tests.fakes import FakeEmbedder

    init_kb(root, name="bench-local")
    for number in range(10):
        (root / "docs" / f"local{number}.md").write_text(f"# Local {number}\n\nText {number}.\n", encoding="utf-8")
    run_sync(root, SyncOptions(quiet=True), embedder=FakeEmbedder())
    relative = os.path.relpath(partner_root, root)
    with (root / "pinakes.toml").open("a", encoding="utf-8") as manifest:
        manifest.write(f'\n[[links.kb]]\nid = "{partner_id}"\nalias = "partner"\npath = "{relative}"\n')


def median_seconds(action: Callable[[], object], rounds: int) -> float:
    times: list[float] = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sidecars", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--inbound-every", type=int, default=10)
    args = parser.parse_args()

    from pinakes.index import schema
    from pinakes.kb import KBPaths
    from pinakes.links import reverse
    from pinakes.manifest import load_manifest
    from pinakes.sources.walk import walk

    with tempfile.TemporaryDirectory() as scratch:
        local, partner = Path(scratch) / "local", Path(scratch) / "partner"
        local.mkdir()
        built = time.perf_counter()
        # the local KB first (its id and documents are what the partner links to)
        placeholder = "0" * 26
        make_local(local, partner, placeholder)
        local_manifest = load_manifest(local / "pinakes.toml")
        conn = schema.open_writer(KBPaths(local).index_db)
        local_docs = [row[0] for row in conn.execute("SELECT id FROM documents ORDER BY path")]
        partner_id = make_partner(partner, args.sidecars, local_manifest.kb.id, local_docs, args.inbound_every)
        text = (local / "pinakes.toml").read_text(encoding="utf-8").replace(placeholder, partner_id)
        (local / "pinakes.toml").write_text(text, encoding="utf-8")
        manifest = load_manifest(local / "pinakes.toml")
        linked = manifest.links[0]
        partner_sources = load_manifest(partner / "pinakes.toml").sources
        print(f"built {args.sidecars} partner documents + sidecars in {time.perf_counter() - built:.1f}s")

        baseline = median_seconds(lambda: walk(partner, partner_sources, {}, hash_contents=False), args.rounds)
        outcomes: list[reverse.PartnerScan] = []
        cold = median_seconds(lambda: outcomes.append(
            reverse.scan_partner(conn, manifest, local, linked, force=True)), args.rounds)
        assert outcomes[-1].status == reverse.SCANNED, outcomes[-1]
        later = reverse.now() + reverse.FRESHNESS_WINDOW * 2
        unchanged = median_seconds(lambda: outcomes.append(
            reverse.scan_partner(conn, manifest, local, linked, force=False, at=later)), args.rounds)
        assert outcomes[-1].status == reverse.UNCHANGED and outcomes[-1].sidecars_read == 0, outcomes[-1]
        stamped = reverse.parse_stamp(reverse.known_refs(conn)[linked.id][2])
        assert stamped is not None
        fresh = median_seconds(lambda: reverse.any_due(conn, local, manifest, force=False, at=stamped), args.rounds)
        assert not reverse.any_due(conn, local, manifest, force=False, at=stamped)
        # the partner marks a change of its links (`pnk link` there, or its sync): due within the window
        (partner / ".pinakes").mkdir(exist_ok=True)
        reverse.mark_links_changed(partner / ".pinakes")
        assert reverse.any_due(conn, local, manifest, force=False, at=stamped)
        inbound = outcomes[-1].inbound
        conn.close()

    print(f"machine: {platform.node()} · {platform.platform()} · {os.cpu_count()} CPUs · "
          f"Python {platform.python_version()} · {datetime.date.today().isoformat()}")
    print(f"partner: {args.sidecars} sidecars, {inbound} links into this KB; median of {args.rounds} rounds")
    print(f"{'what':<44} {'seconds':>9} {'x baseline':>11}")
    for label, seconds in (("baseline: bare sidecar enumeration (stat only)", baseline),
                           ("cold: full scan (read + parse + replace)", cold),
                           ("past the window, unchanged: key, no read", unchanged),
                           ("within the window: due check, no read", fresh)):
        print(f"{label:<44} {seconds:>9.4f} {seconds / baseline:>11.3f}")


if __name__ == "__main__":
    main()
