"""`pnk doctor` on a KB that reranks or embeds on a Ray cluster: the `model.rerank` and
`model.executor` lines (doctor/checks_model.py). Nothing here downloads a model or starts Ray: the
weights are looked up by directory and the cluster's address probed with one TCP connection, so
the tests lay out cache directories and listen on loopback themselves."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pinakes.cli import main
from pinakes.doctor import checks_model
from pinakes.init import init_kb
from pinakes.manifest import load_manifest

RERANKER = "BAAI/bge-reranker-base"


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # an empty model cache
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return init_kb(tmp_path / "kb", name="kb", template="notes").root


def installed(module: str) -> Path | None:
    """`checks_model.package_dir` as if every package were installed under /installed."""
    return Path("/installed") / module


def edit(root: Path, old: str, new: str) -> None:
    manifest = root / "pinakes.toml"
    text = manifest.read_text(encoding="utf-8")
    assert old in text, old
    manifest.write_text(text.replace(old, new, 1), encoding="utf-8")


def rerank_with(root: Path, provider: str) -> None:
    embedding = load_manifest(root / "pinakes.toml").embedding.provider
    edit(root, "rerank = false", "rerank = true")
    edit(root, f'Mirrors [embedding].\nprovider = "{embedding}"', f'Mirrors [embedding].\nprovider = "{provider}"')
    assert load_manifest(root / "pinakes.toml").rerank.provider == provider


def doctor_lines(root: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    main(["-C", str(root), "doctor", "--json"])
    return {check["name"]: check for check in json.loads(capsys.readouterr().out)["checks"]}


def test_a_kb_that_does_not_rerank_or_use_ray_gets_neither_line(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = doctor_lines(kb, capsys)
    assert "model.provider" in lines  # the model area ran
    assert "model.rerank" not in lines and "model.executor" not in lines


@pytest.mark.parametrize("provider", ["fastembed", "sentence-transformers"])
def test_reranker_weights_missing_are_a_warning_that_names_the_way_out(
        kb: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, provider: str) -> None:
    monkeypatch.setattr(checks_model, "package_dir", installed)
    rerank_with(kb, provider)
    line = doctor_lines(kb, capsys)["model.rerank"]
    assert line["status"] == "WARN" and RERANKER in line["detail"] and "refuse" in line["detail"]
    assert "rerank = false" in line["remedy"]


def test_reranker_weights_in_fastembeds_cache_are_found(kb: Path, capsys: pytest.CaptureFixture[str],
                                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks_model, "package_dir", installed)
    entry = tmp_path / "hf-home" / "fastembed" / "models--Xenova--bge-reranker-base" / "snapshots" / "abc"
    entry.mkdir(parents=True)
    (entry / "tokenizer.json").write_text("{}", encoding="utf-8")
    rerank_with(kb, "fastembed")
    line = doctor_lines(kb, capsys)["model.rerank"]
    assert line["status"] == "OK" and str(entry) in line["detail"]


def test_reranker_weights_in_the_hub_cache_are_found(kb: Path, capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks_model, "package_dir", installed)
    repo = tmp_path / "hf-home" / "hub" / "models--BAAI--bge-reranker-base"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("c0ffee\n", encoding="utf-8")
    (repo / "snapshots" / "c0ffee").mkdir(parents=True)
    (repo / "snapshots" / "c0ffee" / "config.json").write_text("{}", encoding="utf-8")
    rerank_with(kb, "sentence-transformers")
    line = doctor_lines(kb, capsys)["model.rerank"]
    assert line["status"] == "OK" and "c0ffee" in line["detail"]


def test_a_reranker_whose_provider_is_not_installed_fails(kb: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    real = checks_model.package_dir

    def fake(module: str) -> Path | None:
        return None if module == "sentence_transformers" else real(module)

    monkeypatch.setattr(checks_model, "package_dir", fake)
    rerank_with(kb, "sentence-transformers")
    line = doctor_lines(kb, capsys)["model.rerank"]
    assert line["status"] == "FAIL" and "every search refuses" in line["detail"]
    assert "[st]" in line["remedy"]


# --- [embedding] executor = "ray" ------------------------------------------------------------------


@pytest.fixture
def listening() -> Iterator[str]:
    """Something answering on loopback, as a cluster's head would (the probe only connects)."""
    server = socket.create_server(("127.0.0.1", 0))
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()


def closed_port() -> str:
    with socket.create_server(("127.0.0.1", 0)) as server:
        return f"127.0.0.1:{server.getsockname()[1]}"  # closed once the block ends: nothing listens


def on_ray(root: Path, address: str | None) -> None:
    line = 'executor = "ray"' + (f'\nray_address = "{address}"' if address else "")
    edit(root, "dim = 384\n", f"dim = 384\n{line}\n")
    assert load_manifest(root / "pinakes.toml").embedding.executor == "ray"


def test_a_cluster_address_where_something_answers_is_ok(kb: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch, listening: str) -> None:
    monkeypatch.setattr(checks_model, "package_dir", installed)
    on_ray(kb, listening)
    line = doctor_lines(kb, capsys)["model.executor"]
    assert line["status"] == "OK" and listening in line["detail"] and "[embedding] ray_address" in line["detail"]


def test_a_cluster_address_where_nothing_answers_warns_with_the_remedy(
        kb: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks_model, "package_dir", installed)
    address = closed_port()
    monkeypatch.setenv("RAY_ADDRESS", address)  # where a sync would look without ray_address
    on_ray(kb, None)
    line = doctor_lines(kb, capsys)["model.executor"]
    assert line["status"] == "WARN" and address in line["detail"] and "RAY_ADDRESS" in line["detail"]
    assert "ray start --head" in line["remedy"] and "--executor local" in line["remedy"]


def test_the_default_address_is_left_to_ray(kb: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks_model, "package_dir", installed)
    on_ray(kb, None)
    line = doctor_lines(kb, capsys)["model.executor"]
    assert line["status"] == "OK" and "auto" in line["detail"] and "not probed" in line["detail"]


def test_ray_not_installed_fails_naming_the_extra(kb: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch, listening: str) -> None:
    real = checks_model.package_dir

    def fake(module: str) -> Path | None:
        return None if module == "ray" else real(module)

    monkeypatch.setattr(checks_model, "package_dir", fake)
    on_ray(kb, listening)
    line = doctor_lines(kb, capsys)["model.executor"]
    assert line["status"] == "FAIL" and "[ray]" in line["remedy"] and "--executor local" in line["remedy"]
