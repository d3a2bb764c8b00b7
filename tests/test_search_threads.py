"""Query-time threading: one BLAS thread and one model-runtime thread in a process that searches
(pinakes.search.threads, search.core.QUERY_MODEL_THREADS; docs/perf/search.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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
    assert searcher._embedder_loader is not None
    assert searcher._embedder_loader() is model
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
    session = one._model.model.model  # type: ignore[attr-defined]
    assert session.get_session_options().intra_op_num_threads == 1
    assert one.embed_query("how do I extract a tar archive").shape == (one.identity.dim,)
