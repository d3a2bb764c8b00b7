"""The registries of embed/registry.py are the one place an embedding provider, an executor or a
reranker is declared. A test registers a fake one with one `monkeypatch.setitem` (nothing in the
package) and sees it everywhere: the manifest accepts its name and refuses the keys it does not take,
`pnk doctor` reports it, a generated CI workflow installs its extra, and a real `pnk sync` and
`pnk search` load it through the real loader and use it; an executor is a `pnk sync --executor`
choice, and a sync connects it before writing and closes it with the run. The worked example of docs/architecture.md
("Adding an embedding provider") runs from the page's own text."""

from __future__ import annotations

import json
import re
import sqlite3
import sys
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pinakes.ci.steps import extras_for
from pinakes.cli import build_parser, main
from pinakes.distribution import pip_install
from pinakes.embed.connect import ConnectRequest
from pinakes.embed.loader import LoadRequest
from pinakes.embed.registry import EXECUTORS, PROVIDERS, RERANKERS, ExecutorSpec, ProviderSpec, RerankerSpec
from pinakes.kb import KBPaths
from pinakes.manifest import InvalidManifestError, RerankSection, load_manifest
from pinakes.search.rerank import RerankRequest
from tests.conftest import REPO_ROOT
from tests.fakes import FakeEmbedder

MANIFEST = """\
[kb]
name = "registries"
id = "01J9Z8Y7X6W5V4T3S2R1Q0P9N8"

[sources]
roots = ["docs"]

[embedding]
provider = "{provider}"
model = "test/words"
dim = 64
{embedding_extra}
[retrieval]
rerank = {rerank}

[rerank]
provider = "{reranker}"
model = "test/overlap"
{rerank_extra}"""

DOCS = {
    "lighthouse.md": "# Lighthouse\n\nThe keeper trims the lamp of the lighthouse every night at dusk.\n",
    "harbour.md": "# Harbour\n\nFishing boats unload their catch at the harbour quay before dawn.\n",
    "orchard.md": "# Orchard\n\nApple trees in the orchard are pruned in late winter.\n",
}

FUSED = "rerank off: passages are in fused order"  # the one note of a search with [retrieval] rerank = false
# What the fakes below were asked for, so a test can tell they ran.
LOADED: list[str] = []
SCORED: list[tuple[str, int]] = []
CONNECTED: list[ConnectRequest] = []
POOL_EVENTS: list[str] = []


def load_words(request: LoadRequest) -> FakeEmbedder:
    """A test's provider: hashed words (tests/fakes.py), under the section's own identity."""
    LOADED.append(request.section.model)
    section = request.section
    return FakeEmbedder(dim=section.dim, model=section.model, provider=section.provider)


class Overlap:
    """A test's reranker: the share of the query's words a passage contains."""

    def __init__(self, model: str) -> None:
        self.model = model

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        SCORED.append((query, len(texts)))
        wanted = set(re.findall(r"\w+", query.lower()))
        return [len(wanted & set(re.findall(r"\w+", text.lower()))) / len(wanted) for text in texts]


def load_overlap(section: RerankSection, request: RerankRequest) -> Overlap:
    return Overlap(section.model)


class Pool(FakeEmbedder):
    """A test's executor: the provider's model held by a pool of two "workers" away from the sync."""

    def watch_workers(self, on_workers: Callable[[int], None] | None) -> None:
        if on_workers is not None:
            on_workers(2)

    def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        POOL_EVENTS.append(f"embed {len(texts)}")
        return super().embed_documents(texts, batch_size)

    def close(self) -> None:
        POOL_EVENTS.append("close")


def connect_pool(request: ConnectRequest) -> Pool:
    CONNECTED.append(request)
    section = request.section
    return Pool(dim=section.dim, model=section.model, provider=section.provider)


WORDS = ProviderSpec("test-words", f"{__name__}:load_words", "hashed words (a test's provider)",
                     extra="testwords", requires="json")
POOL = ExecutorSpec("test-pool", "a test's pool of workers", runs="cluster", connect=f"{__name__}:connect_pool")
OVERLAP = RerankerSpec("test-overlap", f"{__name__}:load_overlap", "query-word overlap (a test's reranker)")


@pytest.fixture(autouse=True)
def fresh_records() -> None:
    LOADED.clear()
    SCORED.clear()
    CONNECTED.clear()
    POOL_EVENTS.clear()


def make_kb(root: Path, *, provider: str = "test-words", reranker: str = "fastembed", rerank: bool = False,
            embedding_extra: str = "", rerank_extra: str = "") -> Path:
    (root / "docs").mkdir(parents=True)
    for name, text in DOCS.items():
        (root / "docs" / name).write_text(text, encoding="utf-8")
    (root / "pinakes.toml").write_text(MANIFEST.format(
        provider=provider, reranker=reranker, rerank=str(rerank).lower(), embedding_extra=embedding_extra,
        rerank_extra=rerank_extra), encoding="utf-8")
    return root


def problems(root: Path) -> list[str]:
    with pytest.raises(InvalidManifestError) as caught:
        load_manifest(root / "pinakes.toml")
    return [problem.render() for problem in caught.value.problems]


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(list(argv))
    return code, json.loads(capsys.readouterr().out)


def doctor_lines(root: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    _, report = run_json(capsys, "-C", str(root), "doctor", "--json")
    return {check["name"]: check for check in report["checks"]}


def index_provider(root: Path) -> str:
    with sqlite3.connect(KBPaths(root).index_db) as conn:
        (provider,) = conn.execute("SELECT value FROM meta WHERE key = 'embedding_provider'").fetchone()
    return provider


# --- an embedding provider -------------------------------------------------------------------------


def test_the_manifest_accepts_a_provider_once_registered_and_refuses_the_keys_it_does_not_take(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_kb(tmp_path / "kb")
    assert problems(root) == ['embedding.provider: "test-words" is not one of "sentence-transformers", '
                              '"fastembed", "openai-compatible"']

    monkeypatch.setitem(PROVIDERS, WORDS.name, WORDS)

    assert load_manifest(root / "pinakes.toml").embedding.provider == "test-words"
    manifest = root / "pinakes.toml"
    manifest.write_text(manifest.read_text().replace('dim = 64\n', 'dim = 64\nbase_url = "http://127.0.0.1:9/v1"\n'))
    assert problems(root) == ['embedding.base_url: only applies to provider = "openai-compatible"']


def test_a_provider_behind_an_endpoint_is_refused_a_ray_executor_by_what_its_entry_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PROVIDERS, "test-served", ProviderSpec("test-served", f"{__name__}:load_words",
                                                               "a test's served model", runs="endpoint"))
    root = make_kb(tmp_path / "kb", provider="test-served", embedding_extra='executor = "ray"\n')

    assert problems(root) == ['embedding.executor: "ray" runs a local model on a cluster; provider "test-served" '
                              'already embeds on its server']


def test_a_registered_provider_is_synced_searched_and_reported_by_doctor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(PROVIDERS, WORDS.name, WORDS)
    root = make_kb(tmp_path / "kb")

    code, report = run_json(capsys, "-C", str(root), "sync", "--json")
    assert code == 0 and report["chunks_embedded"] == len(DOCS)
    assert LOADED == ["test/words"] and index_provider(root) == "test-words"

    code, found = run_json(capsys, "-C", str(root), "search", "lighthouse keeper lamp", "--json")
    assert code == 0 and found["mode"] == "hybrid" and found["notes"] == [FUSED]
    top = found["passages"][0]
    assert top["path"] == "docs/lighthouse.md" and top["scores"]["cosine"] > 0  # its vectors ranked it

    lines = doctor_lines(root, capsys)
    assert lines["model.provider"]["status"] == "OK"
    assert lines["model.provider"]["detail"] == "test-words installed (the [testwords] extra)"
    assert lines["extra [testwords]"]["detail"] == "installed: hashed words (a test's provider)"
    assert lines["model.index"]["status"] == "OK" and "test-words" in lines["model.index"]["detail"]
    assert extras_for(load_manifest(root / "pinakes.toml"))[0] == "testwords"


def test_doctor_names_the_extra_a_registered_provider_needs_when_it_is_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    absent = ProviderSpec(WORDS.name, WORDS.load, WORDS.summary, extra="testwords", requires="pnk_no_such_module")
    monkeypatch.setitem(PROVIDERS, absent.name, absent)
    root = make_kb(tmp_path / "kb")

    line = doctor_lines(root, capsys)["model.provider"]

    assert line["status"] == "FAIL" and "pnk_no_such_module is not importable" in line["detail"]
    assert line["remedy"] == pip_install(("testwords",))


# --- an executor -----------------------------------------------------------------------------------


def test_an_executor_is_a_manifest_value_and_a_sync_flag_once_registered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(PROVIDERS, WORDS.name, WORDS)
    root = make_kb(tmp_path / "kb", embedding_extra='executor = "test-pool"\n')
    assert problems(root) == ['embedding.executor: "test-pool" is not one of "local", "ray"']
    with pytest.raises(SystemExit) as refused:
        build_parser(["sync"]).parse_args(["sync", "--executor", "test-pool"])
    assert refused.value.code == 2 and "invalid choice: 'test-pool'" in capsys.readouterr().err

    monkeypatch.setitem(EXECUTORS, POOL.name, POOL)

    assert load_manifest(root / "pinakes.toml").embedding.executor == "test-pool"
    parser = build_parser(["sync"])
    assert parser.parse_args(["sync", "--executor", "test-pool"]).executor == "test-pool"
    with pytest.raises(SystemExit):
        parser.parse_args(["sync", "--help"])
    assert "one of local, ray, test-pool" in " ".join(capsys.readouterr().out.split())


def test_a_sync_on_a_registered_executor_connects_it_before_writing_and_closes_it_with_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(PROVIDERS, WORDS.name, WORDS)
    monkeypatch.setitem(EXECUTORS, POOL.name, POOL)
    root = make_kb(tmp_path / "kb", embedding_extra='executor = "test-pool"\n')

    code, report = run_json(capsys, "-C", str(root), "sync", "--json")

    assert code == 0 and report["chunks_embedded"] == len(DOCS)
    assert [(request.section.model, request.address, request.rebuilding) for request in CONNECTED] == [
        ("test/words", None, False)]
    assert LOADED == []  # the model was the pool's: the sync's own process loaded none
    assert POOL_EVENTS[-1] == "close" and POOL_EVENTS.count("close") == 1
    assert sum(int(event.split()[1]) for event in POOL_EVENTS if event.startswith("embed")) == len(DOCS)
    assert index_provider(root) == "test-words"

    assert run_json(capsys, "-C", str(root), "sync", "--json")[0] == 0
    assert len(CONNECTED) == 1  # a no-op contacts no executor

    (root / "docs" / "quay.md").write_text("# Quay\n\nThe ferry leaves the quay at noon.\n", encoding="utf-8")
    code, report = run_json(capsys, "-C", str(root), "sync", "--executor", "local", "--json")
    assert code == 0 and report["chunks_embedded"] == 1
    assert len(CONNECTED) == 1 and LOADED == ["test/words"]  # --executor local: the model loaded here


def test_a_cluster_sync_leaves_self_calibration_to_a_command_rather_than_load_a_model_here(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from pinakes.calibration.self_calibration import MIN_DOCUMENTS
    from pinakes.kb import KBPaths
    from pinakes.search.calibrated import self_calibration_path

    monkeypatch.setitem(PROVIDERS, WORDS.name, WORDS)
    monkeypatch.setitem(EXECUTORS, POOL.name, POOL)
    root = make_kb(tmp_path / "kb", embedding_extra='executor = "test-pool"\n')
    for number in range(MIN_DOCUMENTS):  # large enough that a local sync would self-calibrate
        (root / "docs" / f"note{number:02d}.md").write_text(
            f"# Note {number}\n\nThe ferry number {number} crosses the bay at {number} past the hour.\n",
            encoding="utf-8")

    code, report = run_json(capsys, "-C", str(root), "sync", "--json")

    assert code == 0 and LOADED == []  # no model in this process, not even after the sync
    assert not self_calibration_path(KBPaths(root)).exists()
    assert any("not self-calibrated: the model ran on the cluster's workers" in note and "pnk eval --self-calibrate"
               in note for note in report["notes"]), report["notes"]


def test_a_registered_executor_refuses_a_provider_behind_an_endpoint_by_its_entry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PROVIDERS, "test-served", ProviderSpec("test-served", f"{__name__}:load_words",
                                                               "a test's served model", runs="endpoint"))
    monkeypatch.setitem(EXECUTORS, POOL.name, POOL)
    root = make_kb(tmp_path / "kb", provider="test-served", embedding_extra='executor = "test-pool"\n')

    assert problems(root) == ['embedding.executor: "test-pool" runs a local model on a cluster; provider '
                              '"test-served" already embeds on its server']


# --- a reranker ------------------------------------------------------------------------------------


def test_a_registered_reranker_is_accepted_reported_and_reranks_a_real_search(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(PROVIDERS, WORDS.name, WORDS)
    root = make_kb(tmp_path / "kb", reranker="test-overlap", rerank=True)
    assert problems(root) == ['rerank.provider: "test-overlap" is not one of "sentence-transformers", '
                              '"fastembed", "http"']

    monkeypatch.setitem(RERANKERS, OVERLAP.name, OVERLAP)

    assert load_manifest(root / "pinakes.toml").rerank.provider == "test-overlap"
    assert run_json(capsys, "-C", str(root), "sync", "--json")[0] == 0
    code, found = run_json(capsys, "-C", str(root), "search", "apple orchard winter", "--json")
    assert code == 0 and found["reranked"] is True and found["notes"] == []
    assert SCORED and SCORED[0][0] == "apple orchard winter"
    top = found["passages"][0]
    assert top["path"] == "docs/orchard.md" and top["scores"]["rerank"] == 1.0  # all three words: its own score

    line = doctor_lines(root, capsys)["model.rerank"]
    assert line["status"] == "OK" and line["detail"] == "search reranks with test/overlap (test-overlap)"


def test_a_registered_reranker_refuses_an_endpoint_key_it_does_not_take(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PROVIDERS, WORDS.name, WORDS)
    monkeypatch.setitem(RERANKERS, OVERLAP.name, OVERLAP)
    root = make_kb(tmp_path / "kb", reranker="test-overlap", rerank=True, rerank_extra='api = "tei"\n')

    assert problems(root) == ['rerank.api: only applies to provider = "http"']


# --- docs/architecture.md, "Adding an embedding provider" ------------------------------------------


def worked_example() -> tuple[str, str]:
    """The module and the registry entry, as the page's section shows them."""
    page = (REPO_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("## Adding an embedding provider", 1)[1].split("\n## ", 1)[0]
    blocks = [re.sub(r"(?m)^   ", "", block) for block in re.findall(r"```python\n(.*?)```", section, re.S)]
    assert len(blocks) == 2, "the section shows the module, then the entry"
    return blocks[0], blocks[1]


def test_the_architecture_pages_worked_example_adds_a_provider_by_its_module_and_one_entry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    source, entry = worked_example()
    spec = eval(entry.strip().rstrip(","), {"ProviderSpec": ProviderSpec})  # the page's own text
    module_name = spec.load.partition(":")[0]
    module = types.ModuleType(module_name)
    monkeypatch.setitem(sys.modules, module_name, module)  # where the entry says the module is
    exec(compile(source, f"docs/architecture.md ({module_name})", "exec"), module.__dict__)
    monkeypatch.setitem(PROVIDERS, spec.name, spec)
    root = make_kb(tmp_path / "kb", provider=spec.name)

    code, report = run_json(capsys, "-C", str(root), "sync", "--json")
    assert code == 0 and report["chunks_embedded"] == len(DOCS)
    assert index_provider(root) == "word-lengths"
    code, found = run_json(capsys, "-C", str(root), "search", "harbour quay", "--json")
    top = found["passages"][0]
    assert code == 0 and found["notes"] == [FUSED] and top["path"] == "docs/harbour.md" and top["scores"]["cosine"] > 0
    lines = doctor_lines(root, capsys)
    assert lines["model.provider"] == {**lines["model.provider"], "status": "OK",
                                       "detail": "word-lengths needs no extra"}
