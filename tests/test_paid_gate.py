"""The paid-path gate (spec §1, §9): the free path never imports a paid client.

The decisive test runs the whole free path in a fresh interpreter and asserts on `sys.modules`.
Asserting that a package is absent proves nothing where it is not installed, so that test skips
loudly there; the negative controls prove the harness and the AST scan do report a planted import.
"""

from __future__ import annotations

import importlib.util
import os
import textwrap
from pathlib import Path

import pytest

from pinakes.extract.registry import EXTRACTORS
from tests.conftest import REPO_ROOT
from tests.paid_gate_harness import (
    ALLOWLIST_NAME,
    PAID_CLIENTS,
    ProcessReport,
    Step,
    free_path_steps,
    read_allowlist,
    run_in_fresh_process,
    unlisted_paid_importers,
)

ALLOWLIST = REPO_ROOT / ALLOWLIST_NAME


def gate_env(scratch: Path, pythonpath: Path | None = None) -> dict[str, str]:
    """The test session's offline settings, made explicit for a child that has no conftest."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(HF_HOME=str(scratch / "hf"), XDG_CACHE_HOME=str(scratch / "cache"),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PNK_OFFLINE="1")
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return env


@pytest.fixture(scope="module")
def free_path_run(tmp_path_factory: pytest.TempPathFactory) -> ProcessReport:
    scratch = tmp_path_factory.mktemp("free-path")
    report = run_in_fresh_process(free_path_steps(scratch / "kb"), env=gate_env(scratch))
    print(f"free path steps:\n{report.summary()}")
    return report


def test_free_path_loads_no_paid_client(free_path_run: ProcessReport) -> None:
    missing = [client for client in PAID_CLIENTS if importlib.util.find_spec(client) is None]
    if len(missing) == len(PAID_CLIENTS):
        pytest.skip(f"{', '.join(missing)} not installed here, so their absence from sys.modules would pass "
                    "vacuously; this gate runs for real where the [claude] or [remote] extra is installed")
    if missing:  # the installed ones are still checked for real; the rest would pass vacuously
        print(f"not installed here, so not proven absent: {', '.join(missing)}")
    assert free_path_run.paid_clients_loaded == [], (
        f"the free path imported a paid client: {free_path_run.paid_clients_loaded}\n"
        f"steps:\n{free_path_run.summary()}"
    )


def test_free_path_walks_a_real_kb(free_path_run: ProcessReport) -> None:
    """The gate is only as wide as the path it walks: init must make a KB, and nothing may crash."""
    init = free_path_run.outcome("pnk init")
    assert (init.kind, init.code) == ("exit", 0), f"pnk init did not create the KB: {init}"
    crashed = [o for o in free_path_run.outcomes if o.kind == "crash"]
    assert not crashed, "\n".join(f"{o.step}:\n{o.detail}" for o in crashed)


def test_ask_without_deep_is_on_the_free_path_and_loads_no_allowlisted_module(free_path_run: ProcessReport) -> None:
    ask = next(o for o in free_path_run.outcomes if " ask " in f"{o.step} ")
    assert (ask.kind, ask.code) == ("exit", 0), ask
    assert sorted(set(read_allowlist(ALLOWLIST)) & free_path_run.modules) == []


def test_gate_reports_an_import_planted_in_the_free_path(tmp_path: Path) -> None:
    """Negative control: a doctor check that imports the client, as the spec's first real leak did."""
    plant = tmp_path / "plant"
    (plant / "anthropic").mkdir(parents=True)
    (plant / "anthropic" / "__init__.py").write_text("# a stand-in: the control must run without the SDK\n")
    (plant / "doctor_plant").mkdir()
    (plant / "doctor_plant" / "checks_plant.py").write_text(textwrap.dedent("""
        from pinakes.doctor import Check

        def checks(ctx):
            import anthropic  # reporting a backend's availability by loading its client
            yield Check("plant", "OK", "anthropic importable")
    """))
    (plant / "sitecustomize.py").write_text(textwrap.dedent(f"""
        import pinakes.doctor as doctor

        doctor.__path__.append({str(plant / "doctor_plant")!r})
        doctor.CHECK_MODULES = (*doctor.CHECK_MODULES, "plant")
        doctor.ENVIRONMENT_AREAS = doctor.ENVIRONMENT_AREAS | {{"plant"}}
    """))

    report = run_in_fresh_process([Step(argv=("doctor", "--json"))], env=gate_env(tmp_path, plant))

    assert '"plant"' in report.output, f"the planted check did not run:\n{report.output}"
    assert report.paid_clients_loaded == ["anthropic"]


def test_no_unlisted_module_imports_a_paid_client() -> None:
    assert unlisted_paid_importers(REPO_ROOT) == {}, f"only {ALLOWLIST_NAME} modules may import a paid client"


def test_static_scan_catches_every_spelling_outside_the_allowlist(tmp_path: Path) -> None:
    (tmp_path / ALLOWLIST_NAME).write_text("# header\npinakes.extract.claude_vision  # the extractor\n")
    sources = {
        "src/pinakes/extract/claude_vision.py": "import anthropic\n",
        "src/pinakes/leak_plain.py": "import os, anthropic\n",
        "src/pinakes/leak_from.py": "from anthropic.types import Message\n",
        "src/pinakes/leak_lazy.py": "def client():\n    import anthropic as sdk\n    return sdk\n",
        "src/pinakes/leak_dynamic.py": "import importlib\nimportlib.import_module('anthropic')\n",
        "src/pinakes/sub/__init__.py": "__import__('anthropic.resources')\n",
        "rules/leak_rule.py": "from anthropic import Anthropic\n",  # mapped into the package
        "src/pinakes/clean_lookalike.py": "import anthropic_tools\nfrom . import anthropic\n",
        "src/pinakes/clean_spec.py": "import importlib.util\nimportlib.util.find_spec('anthropic')\n",
    }
    for relative, text in sources.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)

    offenders = unlisted_paid_importers(tmp_path)

    assert offenders == {
        "pinakes.leak_plain": ["anthropic"],
        "pinakes.leak_from": ["anthropic.types"],
        "pinakes.leak_lazy": ["anthropic"],
        "pinakes.leak_dynamic": ["anthropic"],
        "pinakes.sub": ["anthropic.resources"],
        "pinakes.rules.leak_rule": ["anthropic"],
    }


def test_allowlist_names_exactly_the_three_paid_entry_points() -> None:
    # Spec §1: exactly these may spend. Growing this list edits §1 and INVARIANTS.md too.
    assert set(read_allowlist(ALLOWLIST)) == {"pinakes.extract.claude_vision", "pinakes.deep.calls",
                                              "pinakes.embed.provider_openai"}


def test_paid_extractors_and_only_they_are_allowlisted() -> None:
    allowed = set(read_allowlist(ALLOWLIST))
    for spec in EXTRACTORS.values():
        assert (spec.module in allowed) == spec.paid, f"extractor {spec.name} ({spec.module})"


def test_allowlist_refuses_a_line_that_is_not_a_module_name(tmp_path: Path) -> None:
    bad = tmp_path / ALLOWLIST_NAME
    bad.write_text("pinakes.deep.calls\nsrc/pinakes/extract/claude_vision.py\n")
    with pytest.raises(ValueError, match=r":2: not a dotted module name"):
        read_allowlist(bad)


def test_the_gate_harness_is_not_part_of_the_runtime_package() -> None:
    """A socket patcher and test driver ship in no wheel: the harness lives in tests/ alone."""
    assert importlib.util.find_spec("pinakes.paid_gate") is None
    assert not (REPO_ROOT / "src" / "pinakes" / "paid_gate.py").exists()
