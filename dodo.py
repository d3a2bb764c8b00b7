"""Developer tasks for the Pinakes repository: `doit list` shows them, `doit` runs lint and test.

Every task runs its tool through this interpreter (`python -m ...`), so the tools of the active
virtualenv are used whichever `doit` executable started the run. None declares file dependencies:
the tools keep their own caches, and a check that reports "up to date" without running is no check.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
# doit's own state, kept in one ignorable folder instead of beside the sources.
STATE_DIR = ROOT / ".pinakes-dev"
STATE_DIR.mkdir(exist_ok=True)

DOIT_CONFIG = {
    "default_tasks": ["lint", "test"],
    "verbosity": 2,
    "dep_file": str(STATE_DIR / "doit-state.json"),
    # json reads the same on every interpreter; dbm's on-disk format depends on how Python was built.
    "backend": "json",
}

PYTHON = sys.executable


def task_lint():
    """ruff check over the whole repository"""
    return {"actions": [[PYTHON, "-m", "ruff", "check", "."]], "verbosity": 2}


def task_typecheck():
    """pyright (basic) over src/ and dodo.py, as configured in pyproject.toml"""
    return {"actions": [[PYTHON, "-m", "pyright"]], "verbosity": 2}


def task_test():
    """the default test suite (heavy tests deselected)"""
    return {"actions": [[PYTHON, "-m", "pytest"]], "verbosity": 2}


def task_test_heavy():
    """only the heavy tests: real models, larger data, the wheel install"""
    return {"actions": [[PYTHON, "-m", "pytest", "-m", "heavy"]], "verbosity": 2}


def task_eval():
    """pnk eval over the demo KB's golden set"""
    return {"actions": [[PYTHON, "-m", "pinakes", "eval", str(ROOT / "tests" / "demo-kb")]], "verbosity": 2}


def task_pdf_eval():
    """PDF extraction quality (spec §7.1): the scored corpus against its baseline, floors re-fitted"""
    return {"basename": "pdf-eval",
            "actions": [[PYTHON, str(ROOT / "tests" / "pdf-corpus" / "evaluate.py")]], "verbosity": 2}


def task_docs():
    """regenerate the parts of docs/ whose truth is the code (CLI flags, manifest keys, MCP tools, errors)"""
    return {"actions": [[PYTHON, str(ROOT / "docs" / "generate.py")]], "verbosity": 2}


def task_bench():
    scripts = sorted(p for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_"))
    yield {"name": None, "doc": "every benchmark script in bench/ (one subtask each: doit bench:NAME)"}
    if not scripts:
        yield {"name": "none", "doc": "bench/ holds no scripts yet", "actions": [_say_no_benchmarks],
               "verbosity": 2}
    for script in scripts:
        yield {
            "name": script.stem,
            "doc": f"run bench/{script.name}",
            "actions": [[PYTHON, str(script)]],
            "verbosity": 2,
        }


def _say_no_benchmarks() -> None:
    print("bench/ holds no benchmark scripts yet")
