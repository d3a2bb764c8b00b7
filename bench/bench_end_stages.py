"""The memory of a large sync's last stages, each alone in a fresh process, on a synced KB (issue #45:
"the first sync of a 700k-page tree ... stays under 1 GB RSS throughout"; bench_first_sync_rss.py
measures the whole run, this names which end stage costs what, before a whole run reaches it).

    nice -n 10 python bench/bench_end_stages.py --kb /tmp/scale1m/kb918 [--stages graph ann-load calibrate]

Each stage runs in its own child process (its RSS is its own); the child reports its VmRSS before
the stage (imports and an open index) and its VmHWM (peak) after it, from /proc. The KB is written
to (the graph is derived again; `ann-build` writes `.pinakes/vectors.ann`): use a copy.

- `graph`: the graph derived in full (`pipeline.graph.derive_graph`, what a first sync runs).
- `ann-load`: the vector file's pieces loaded into memory one at a time, as its incremental update
  loads them; the peak is the largest piece, what a whole build reaches (a built index holds what a
  loaded one does).
- `ann-build`: the vector file built whole (`vectors.build.refresh_vector_file`, the sync's step;
  `--rows N`: of the first N active vectors only, to read the growth a row). Tens of CPU-minutes at 1M.
- `twins`, `twins-matrix`: self-calibration's unanswerable twins (`TWINS` vector searches, each
  with one document left out) with the vector file as the tier answers them now, and as it did
  before (a float32 matrix of the allowed rows per search): needs a KB whose vectors.ann is current.
- `calibrate`: the sync's self-calibration (`calibration.on_sync.after_sync`'s search, bounded to
  its `SYNC_SECONDS`) with bench_writer's FastEmbedder, the stored calibration removed first; the
  memory when its questions are made and when its searches are done. `calibrate-trim`: the same
  with the heap collected and trimmed between the two (a lever measured, not shipped).
- `calibrate-random`, `calibrate-release`, `calibrate-both`, `calibrate-unreleased`: the same
  calibration with the vector file's mapping advised MADV_RANDOM when it opens (no readahead), its
  pages unmapped (MADV_DONTNEED: the page cache keeps them) after each question, both, or without
  the product's own release of each piece's pages after its search (the calibration's searcher sets
  `release_vector_pages`; calpages measured the first three on a one-piece file: none lowers the
  peak; bench/bench_file_pages.py measures the mapping alone). Each question's CPU, minor faults and
  RssFile after it are recorded; the rows' digest says the questions and their features are the same.

Every stage's child is also sampled from outside every `SAMPLE_SECONDS` (VmRSS, RssFile: what
bench_first_sync_rss.py samples), and each `calibrate-*` stage is printed as ratios against
`calibrate` measured in the same run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import mmap
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "src"))


def memory() -> dict[str, int]:
    """VmRSS, VmHWM, RssAnon, RssFile of this process in MB."""
    values: dict[str, int] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            values[key] = round(int(rest.split()[0]) / 1024)
    return values


def stage_graph(root: Path, _rows: int) -> dict[str, object]:
    from pinakes.index import schema
    from pinakes.manifest import load_manifest
    from pinakes.pipeline.graph import derive_graph

    conn = schema.open_writer(root / ".pinakes" / "index.db")
    kb_id = load_manifest(root / "pinakes.toml").kb.id
    before = memory()
    census = derive_graph(conn, kb_id, None)
    conn.close()
    return {"before": before, "census": census}


def stage_ann_load(root: Path, _rows: int) -> dict[str, object]:
    from pinakes.vectors import engine
    from pinakes.vectors.build import _load_piece  # pyright: ignore[reportPrivateUsage]  # the bench drives the private part
    from pinakes.vectors.fileformat import read_header, vector_file_path

    path = vector_file_path(root / ".pinakes")
    header = read_header(path)
    before = memory()
    for piece in header.pieces:  # as an update loads them: one at a time, each freed before the next
        index = engine.new_index(header.dim, header.params)
        _load_piece(index, path, piece)
        index.reset()
        del index
    loaded = memory()  # its VmHWM: the largest piece
    return {"before": before, "loaded": loaded, "rows": header.rows, "pieces": len(header.pieces),
            "file_bytes": header.file_bytes, "library": engine.load_library()[0]}


def stage_ann_build(root: Path, rows: int) -> dict[str, object]:
    from pinakes.embed.base import identity_meta
    from pinakes.index import schema
    from pinakes.vectors import engine, source
    from pinakes.vectors.build import refresh_vector_file
    from pinakes.vectors.fileformat import vector_file_path

    if rows:  # the first `rows` active vectors only
        whole = source.vector_batches

        def first(conn: sqlite3.Connection, dim: int):
            taken = 0
            for ids, batch in whole(conn, dim):
                if taken >= rows:
                    return
                yield ids[:rows - taken], batch[:rows - taken]
                taken += len(ids)
        import pinakes.vectors.build as build
        build.vector_batches = first
    from bench_writer import FastEmbedder

    identity = FastEmbedder().identity
    vector_file_path(root / ".pinakes").unlink(missing_ok=True)
    conn = schema.open_reader(root / ".pinakes" / "index.db")
    engine.load_library()
    before = memory()
    started = time.perf_counter()
    report = refresh_vector_file(conn, root / ".pinakes", identity_meta(identity), identity.dim, min_rows=0)
    return {"before": before, "mode": report.mode, "rows_built": rows or report.rows, "file_bytes": report.file_bytes,
            "seconds": round(time.perf_counter() - started, 1)}


def stage_calibrate(root: Path, _rows: int, trim_before_searches: bool = False, pages: str = "keep"
                    ) -> dict[str, object]:
    """`calibrate`: the sync's self-calibration, with the memory at its phases: when the questions
    are made (before the first search), and when the last search is done (the searcher still open,
    its vector file mapped). `calibrate-trim`: the same with the heap collected and trimmed between
    the two (pipeline.run.collect_and_trim), what the question-making freed handed back before
    the searcher maps the file. `pages`: what is done with the vector file's mapping (`advise_pages`)."""
    from contextlib import contextmanager

    from bench_writer import FastEmbedder

    import pinakes.calibration.self_calibration as self_calibration
    from pinakes.calibration.on_sync import after_sync
    from pinakes.kb import KBPaths
    from pinakes.manifest import load_manifest
    from pinakes.pipeline.report import SyncReport
    from pinakes.pipeline.run import collect_and_trim
    from pinakes.search.calibrated import self_calibration_path

    paths = KBPaths(root)
    self_calibration_path(paths).unlink(missing_ok=True)
    manifest = load_manifest(paths.manifest)
    embedder = FastEmbedder()
    report = SyncReport(str(root), "sync")
    phases: dict[str, object] = {}
    asking = self_calibration.asking_searcher

    @contextmanager
    def measured(*args: Any, **kwargs: Any):  # asking_searcher's own arguments, passed through
        phases["questions_made"] = memory()
        if trim_before_searches:
            collect_and_trim()
            phases["questions_made_trimmed"] = memory()
        with asking(*args, **kwargs) as searcher:
            yield searcher
        phases["searches_done"] = memory()

    self_calibration.asking_searcher = measured
    questions = advise_pages(pages)
    before = memory()
    started = time.perf_counter()
    after_sync(paths, manifest, report, embedder)
    stored: dict[str, Any] = json.loads(self_calibration_path(paths).read_text(encoding="utf-8")) \
        if self_calibration_path(paths).exists() else {}
    asked = len(questions)
    return {"before": before, **phases, "seconds": round(time.perf_counter() - started, 1),
            "pages": pages, "questions": stored.get("questions"),
            # The first 20 questions' rows (each its kind and features): the same in every mode.
            "rows_digest_20": hashlib.sha256(json.dumps(stored.get("rows", [])[:40]).encode()).hexdigest()[:16],
            "question_cpu_ms_median": round(statistics.median(q["cpu_ms"] for q in questions[1:]), 1) if asked > 1 else None,
            "question_wall_ms_median": round(statistics.median(q["wall_ms"] for q in questions[1:]), 1) if asked > 1 else None,
            "question_minflt_median": statistics.median(q["minflt"] for q in questions[1:]) if asked > 1 else None,
            "first_question": questions[0] if questions else None,
            "rss_file_after_question_max": max((q["RssFile"] for q in questions[1:]), default=None),
            "rss_file_released_max": max((q.get("RssFile_released", q["RssFile"]) for q in questions[1:]), default=None),
            "notes": report.notes, "warnings": report.warnings}


def advise_pages(pages: str) -> list[dict[str, float]]:
    """Wrap the calibration's question (`Searcher.search_twice`) to record each one's CPU, wall time,
    minor faults and memory after it (the list returned fills as it runs), and do `pages` with the
    vector file's mapping: "keep" nothing more than the product does (since vecpieces' follow-up the
    calibration's searcher hands each piece's pages back after searching it: OpenVectorFile
    `release_pages`), "random" MADV_RANDOM when the file opens, "release" MADV_DONTNEED of the whole
    mapping after each question, "both" the two, "unreleased" the product's per-piece release turned
    off (what shipped before it)."""
    import pinakes.vectors.approximate as approximate
    from pinakes.search.core import Searcher
    from pinakes.search.results import SearchResult

    if pages in ("random", "both"):
        opening = approximate.open_vector_file

        def opened_advised(*args: Any, **kwargs: Any) -> approximate.OpenVectorFile:  # passed through
            opened = opening(*args, **kwargs)
            opened._mapping.madvise(mmap.MADV_RANDOM)  # pyright: ignore[reportPrivateUsage]  # the bench drives the private part
            return opened
        approximate.open_vector_file = opened_advised
    if pages == "unreleased":  # the product's own release of each piece after its search, turned off
        approximate.OpenVectorFile.release_piece = lambda self, number: None
    questions: list[dict[str, float]] = []
    search_twice = Searcher.search_twice

    def recorded(self: Searcher, *args: Any, **kwargs: Any) -> tuple[SearchResult, SearchResult]:  # passed through
        cpu, wall = time.process_time(), time.perf_counter()
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        answer = search_twice(self, *args, **kwargs)
        record = {"cpu_ms": round((time.process_time() - cpu) * 1000, 1),
                  "wall_ms": round((time.perf_counter() - wall) * 1000, 1),
                  "minflt": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults, **memory()}
        generation = self._generation  # pyright: ignore[reportPrivateUsage]  # the bench drives the private part
        if pages in ("release", "both") and generation is not None and generation.vector_file is not None:
            generation.vector_file._mapping.madvise(mmap.MADV_DONTNEED)  # pyright: ignore[reportPrivateUsage]  # the bench drives the private part
            record["released_ms"] = round((time.perf_counter() - wall) * 1000 - record["wall_ms"], 2)
            record["RssFile_released"] = memory()["RssFile"]
        questions.append(record)
        return answer
    Searcher.search_twice = recorded
    return questions


def stage_calibrate_trim(root: Path, rows: int) -> dict[str, object]:
    return stage_calibrate(root, rows, trim_before_searches=True)


def stage_calibrate_random(root: Path, rows: int) -> dict[str, object]:
    return stage_calibrate(root, rows, pages="random")


def stage_calibrate_release(root: Path, rows: int) -> dict[str, object]:
    return stage_calibrate(root, rows, pages="release")


def stage_calibrate_both(root: Path, rows: int) -> dict[str, object]:
    return stage_calibrate(root, rows, pages="both")


def stage_calibrate_unreleased(root: Path, rows: int) -> dict[str, object]:
    return stage_calibrate(root, rows, pages="unreleased")


# Self-calibration's unanswerable twins: a question's source document left out by a filter.
TWINS = 6


def twin_questions(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(document id, query) for `TWINS` documents spread over the index: the query is the first
    twelve words of the document's first chunk, the document left out as self-calibration does."""
    count = conn.execute("SELECT count(*) FROM documents WHERE state = 'active'").fetchone()[0]
    questions: list[tuple[str, str]] = []
    for step in range(TWINS):
        doc_id = conn.execute("SELECT id FROM documents WHERE state = 'active' ORDER BY id LIMIT 1 OFFSET ?",
                              [count * step // TWINS]).fetchone()[0]
        text = conn.execute("SELECT text FROM chunks WHERE doc_id = ? ORDER BY ordinal LIMIT 1",
                            [doc_id]).fetchone()[0]
        questions.append((doc_id, " ".join(text.split()[:12])))
    return questions


def stage_twins(root: Path, _rows: int, matrix: bool = False) -> dict[str, object]:
    """`twins`: self-calibration's twin searches (vector mode, one document left out) through the
    product's Searcher with the vector file; `twins-matrix`: the same filters answered as the tier
    did before (a float32 matrix of the allowed rows per search, `load_matrix(where=...)`)."""
    from dataclasses import replace

    import numpy as np
    from bench_writer import FastEmbedder

    from pinakes.kb import KBPaths
    from pinakes.lexical.filters import SearchFilters, document_where
    from pinakes.manifest import load_manifest
    from pinakes.search import vectors
    from pinakes.search.calibrated import KBConfidence
    from pinakes.search.core import Searcher, SearchSettings

    paths = KBPaths(root)
    manifest = load_manifest(paths.manifest)
    embedder = FastEmbedder()
    settings = replace(SearchSettings.from_retrieval(manifest.retrieval, KBConfidence.for_kb(paths, None)),
                       vector_tier="auto", rerank=False)
    searcher = Searcher(paths.index_db, settings, embedder=embedder)
    searcher.search("warm up the generation", mode="vector", rerank=False)
    generation = searcher._generation  # pyright: ignore[reportPrivateUsage]  # the bench drives the private part
    assert generation is not None
    questions = twin_questions(generation.conn)
    before = memory()
    searches: list[dict[str, object]] = []
    for doc_id, query in questions:
        filters = SearchFilters(exclude_doc_ids=(doc_id,))
        started, cpu = time.perf_counter(), time.process_time()
        if matrix:
            where = document_where(filters, "d")
            rows = vectors.load_matrix(generation.conn, 384, paths.index_db, where=(where[0], where[1]))
            found = vectors.vector_search(rows, embedder.embed_query(query), settings.candidates_per_source)
            docs: set[str] = {rows.documents[rows.doc_rows[int(np.searchsorted(rows.chunk_ids, chunk))]]
                              for chunk, _ in found}
            del rows
        else:
            result = searcher.search(query, filters=filters, mode="vector", rerank=False)
            found, docs = result.passages, {p.doc_id for p in result.passages}
        searches.append({"seconds": round(time.perf_counter() - started, 2), "cpu": round(time.process_time() - cpu, 2),
                         "found": len(found), "left_out_found": doc_id in docs, "after": memory()})
    tier = "matrix" if matrix else ("file" if generation.vector_file is not None else "exact")
    searcher.close()
    return {"before": before, "tier": tier, "matrix_loaded": generation.matrix is not None, "searches": searches}


def stage_twins_matrix(root: Path, rows: int) -> dict[str, object]:
    return stage_twins(root, rows, matrix=True)


STAGES = {"graph": stage_graph, "ann-load": stage_ann_load, "ann-build": stage_ann_build, "calibrate": stage_calibrate,
          "calibrate-trim": stage_calibrate_trim, "calibrate-random": stage_calibrate_random,
          "calibrate-release": stage_calibrate_release, "calibrate-both": stage_calibrate_both,
          "calibrate-unreleased": stage_calibrate_unreleased,
          "twins": stage_twins, "twins-matrix": stage_twins_matrix}
SAMPLE_SECONDS = 0.05  # how often the parent reads the child's VmRSS and RssFile


def sampled(command: list[str]) -> tuple[int, str, str, dict[str, object]]:
    """Run `command`, reading its VmRSS and RssFile (MB) every SAMPLE_SECONDS from outside:
    (return code, stdout, stderr, the samples' max and median)."""
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        samples: list[tuple[int, int]] = []
        status = Path(f"/proc/{process.pid}/status")
        while process.poll() is None:
            try:
                fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
                samples.append((round(int(fields["VmRSS"].split()[0]) / 1024),
                                round(int(fields["RssFile"].split()[0]) / 1024)))
            except (OSError, KeyError, ValueError):
                pass
            time.sleep(SAMPLE_SECONDS)
        out, err = process.communicate()
    rss = [sample[0] for sample in samples] or [0]
    files = [sample[1] for sample in samples] or [0]
    return process.returncode, out, err, {"samples": len(samples), "VmRSS_max": max(rss),
                                          "VmRSS_median": statistics.median(rss), "RssFile_max": max(files),
                                          "RssFile_median": statistics.median(files)}


def ratios(results: list[dict[str, object]]) -> None:
    """Each `calibrate-*` stage against the `calibrate` before it in this run (fresh processes)."""
    base: dict[str, object] | None = None
    for result in results:
        if result.get("stage") == "calibrate":
            base = result
        elif str(result.get("stage", "")).startswith("calibrate-") and base is not None and "after" in result:
            def ratio(key: str, part: str | None = None, res: dict[str, object] = result,
                      ref: dict[str, object] = base) -> float | None:
                mine, theirs = res.get(key), ref.get(key)
                if part is not None:
                    mine = cast(dict[str, object], mine).get(part) if isinstance(mine, dict) else None
                    theirs = cast(dict[str, object], theirs).get(part) if isinstance(theirs, dict) else None
                if isinstance(mine, (int, float)) and isinstance(theirs, (int, float)) and theirs:
                    return round(mine / theirs, 3)
                return None
            print(json.dumps({"ratio": f"{result['stage']} / calibrate", "VmHWM": ratio("after", "VmHWM"),
                              "VmRSS_after": ratio("after", "VmRSS"), "RssFile_after": ratio("after", "RssFile"),
                              "sampled_VmRSS_max": ratio("sampled", "VmRSS_max"),
                              "sampled_VmRSS_median": ratio("sampled", "VmRSS_median"),
                              "questions": ratio("questions"), "question_cpu_ms": ratio("question_cpu_ms_median"),
                              "question_wall_ms": ratio("question_wall_ms_median"),
                              "same_rows_20": result.get("rows_digest_20") == base.get("rows_digest_20")}), flush=True)


def child(stage: str, root: Path, rows: int) -> None:
    result = STAGES[stage](root, rows)
    print(json.dumps({"stage": stage, **result, "after": memory()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kb", type=Path, required=True)
    parser.add_argument("--stages", nargs="*", default=["graph", "ann-load", "calibrate"], choices=list(STAGES))
    parser.add_argument("--rows", type=int, default=0, help="ann-build: of the first N vectors only")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.kb, args.rows)
        return
    results: list[dict[str, object]] = []
    for stage in args.stages:
        started = time.perf_counter()
        load = os.getloadavg()
        returncode, out, err, samples = sampled([sys.executable, __file__, "--kb", str(args.kb), "--rows",
                                                 str(args.rows), "--child", stage])
        if returncode:
            print(err[-3000:], file=sys.stderr)
            results.append({"stage": stage, "returncode": returncode})
            continue
        result = json.loads(out.strip().splitlines()[-1])
        result.update(sampled=samples, wall_s=round(time.perf_counter() - started, 1), load_before=load,
                      load_after=os.getloadavg(), date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
        print(json.dumps(result), flush=True)
        results.append(result)
    ratios(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
