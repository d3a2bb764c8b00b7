"""Query-time threading: one BLAS thread and one model-runtime thread in a process that searches
(pinakes.search.threads, search.core.QUERY_MODEL_THREADS; docs/perf/search.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from pinakes.search.core import QUERY_MODEL_THREADS, Searcher
from pinakes.search.threads import BLAS_THREADS_VARIABLE

REPO = Path(__file__).resolve().parent.parent


def python(code: str, **env: str) -> str:
    clean = {key: value for key, value in os.environ.items() if key != BLAS_THREADS_VARIABLE}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env={**clean, **env}, check=True)
    return done.stdout.strip()


SHOW = f"import os; print(os.environ.get({BLAS_THREADS_VARIABLE!r}))"


def test_one_blas_thread_is_asked_for_before_numpy_loads() -> None:
    assert python("from pinakes.search.threads import prefer_one_blas_thread as p; p(); " + SHOW) == "1"


def test_a_process_that_already_loaded_numpy_or_chose_a_count_is_left_alone() -> None:
    assert python("import numpy; from pinakes.search.threads import prefer_one_blas_thread as p; p(); "
                  + SHOW) == "None"
    assert python("from pinakes.search.threads import prefer_one_blas_thread as p; p(); " + SHOW,
                  **{BLAS_THREADS_VARIABLE: "4"}) == "4"


@pytest.mark.parametrize("argv", [["search", "anything"], ["ask", "anything"], ["serve", "--port", "80"]])
def test_the_searching_commands_ask_first_thing(tmp_path: Path, argv: list[str]) -> None:
    """Even a command that then fails (no KB here, or a bad flag) asked before importing NumPy."""
    code = (f"import sys; from pinakes.cli import main; main(['-C', {str(tmp_path)!r}, *{argv!r}]); "
            f"print('numpy' in sys.modules); " + SHOW)
    assert python(code).splitlines()[-2:] == ["False", "1"]


def test_a_kb_searcher_loads_its_query_model_with_one_runtime_thread(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    from tests.fakes import FakeEmbedder, substitute_embedder

    seen: dict[str, Any] = {}
    model = FakeEmbedder()

    def fake_load(section: Any, **options: Any) -> FakeEmbedder:
        seen.update(options)
        return model

    substitute_embedder(monkeypatch, fake_load)
    from pinakes.init import init_kb

    init_kb(tmp_path / "kb", name="threads")
    searcher = Searcher.for_kb(tmp_path / "kb")
    loader = searcher._embedder_loader  # pyright: ignore[reportPrivateUsage] -- the test pins the loader's threads
    assert loader is not None
    assert loader() is model
    assert seen["threads"] == QUERY_MODEL_THREADS == 1


@pytest.mark.heavy
def test_fastembed_runs_the_query_model_on_the_threads_asked_for(tmp_path: Path) -> None:
    pytest.importorskip("fastembed", reason="the [light] extra (fastembed) is not installed")
    from pinakes.embed import load_embedder
    from pinakes.init import init_kb
    from pinakes.manifest import load_manifest

    init_kb(tmp_path / "kb", name="threads")
    section = load_manifest(tmp_path / "kb" / "pinakes.toml").embedding
    if section.provider != "fastembed":
        pytest.skip(f"the default KB names {section.provider}, not fastembed: nothing to check here")
    one = load_embedder(section, offline=True, threads=1)
    session = cast(Any, one)._model.model.model  # fastembed's onnxruntime session, under the Embedder protocol
    assert session.get_session_options().intra_op_num_threads == 1
    assert one.embed_query("how do I extract a tar archive").shape == (one.identity.dim,)


BULK = """
import os, numpy
from threadpoolctl import threadpool_info
from pinakes.search.threads import one_blas_thread

def counts():
    return sorted({info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"})

before = counts()
with one_blas_thread():
    inside = counts()
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(writer, repr(counts()).encode())
        os._exit(0)
    os.close(writer)
    forked = os.read(reader, 100).decode()
    os.waitpid(pid, 0)
print(before, inside, forked, counts(), sep="|")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the forked child's count needs os.fork")
def test_a_process_that_has_numpy_searches_in_bulk_on_one_blas_thread_and_gets_its_count_back() -> None:
    before, inside, forked, after = python(BULK, **{BLAS_THREADS_VARIABLE: "2"}).split("|")
    if before == "[]":
        pytest.skip("this NumPy reports no BLAS library threadpoolctl can limit: nothing to check here")
    assert before == after == "[2]"
    assert inside == forked == "[1]"  # a child forked inside (the calibration's second asker) keeps one


def test_the_self_calibrations_searches_run_on_one_blas_thread(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from threadpoolctl import threadpool_info, threadpool_limits  # pyright: ignore[reportMissingTypeStubs]  # ships no type stubs

    from pinakes.calibration import self_calibration
    from tests.fakes import HashEmbedder
    from tests.kb_helpers import build_kb
    from tests.test_self_calibration import corpus, searcher_for
    from tests.test_self_calibration_cost import BatchingEmbedder

    def blas_threads() -> set[int]:
        return {int(info["num_threads"]) for info in cast(list[dict[str, Any]], threadpool_info())
                if info["user_api"] == "blas"}

    if not blas_threads():
        pytest.skip("this NumPy reports no BLAS library threadpoolctl can limit: nothing to check here")
    seen: list[set[int]] = []
    search = self_calibration.search_questions

    def recorded(*args: Any, **kwargs: Any) -> Any:
        seen.append(blas_threads())
        return search(*args, **kwargs)

    monkeypatch.setattr(self_calibration, "search_questions", recorded)
    root = tmp_path / "kb"
    build_kb(root, corpus(), HashEmbedder())
    seen.clear()  # the sync's own calibration
    with threadpool_limits(limits=2, user_api="blas"), searcher_for(root, BatchingEmbedder()) as searcher:
        assert blas_threads() == {2}
        self_calibration.self_calibrate(root, searcher=searcher)
        assert blas_threads() == {2}
    assert seen == [{1}]


TWO_BLOCKS = """
import threading, time, numpy
from threadpoolctl import threadpool_info
from pinakes.search.threads import one_blas_thread

def counts():
    return sorted({info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"})

a_inside, b_done = threading.Event(), threading.Event()
seen = []

def first():
    with one_blas_thread():
        a_inside.set()
        b_done.wait(30)
        seen.append(("a", counts()))

def second():
    a_inside.wait(30)
    started = time.monotonic()
    with one_blas_thread():  # the first block is open: this one neither waits nor sets
        seen.append(("b", counts(), time.monotonic() - started < 5))
    b_done.set()

threads = [threading.Thread(target=first), threading.Thread(target=second)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join(60)
print(seen, counts(), sep="|")
"""


def test_a_block_opened_while_another_thread_has_one_neither_waits_nor_leaves_the_count_wrong() -> None:
    seen, after = python(TWO_BLOCKS, **{BLAS_THREADS_VARIABLE: "2"}).split("|")
    if after == "[]":
        pytest.skip("this NumPy reports no BLAS library threadpoolctl can limit: nothing to check here")
    assert seen == "[('b', [1], True), ('a', [1])]"
    assert after == "[2]"

