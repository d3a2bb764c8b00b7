"""Heavy dependencies load only when a command needs them (asserted on a fresh process's sys.modules).

`pnk --help` builds every command's parser, so it proves that no command module imports the core
at module level. init and doctor must work on a core-only install, so neither may load a model
backend (doctor locates models, it never loads them).
"""

from __future__ import annotations

from pathlib import Path

from tests.paid_gate_harness import ProcessReport, Step, run_in_fresh_process

NOT_FOR_HELP = ("numpy", "fastembed", "onnxruntime", "torch", "transformers", "sentence_transformers",
                "doit", "mcp", "anthropic", "pypdfium2")
MODEL_BACKENDS = ("fastembed", "onnxruntime", "torch", "transformers", "sentence_transformers")


def loaded(report: ProcessReport, packages: tuple[str, ...]) -> list[str]:
    return sorted({name.split(".")[0] for name in report.modules if name.split(".")[0] in packages})


def test_help_imports_no_heavy_dependency() -> None:
    report = run_in_fresh_process([Step(argv=("--help",))])

    assert (report.outcomes[0].kind, report.outcomes[0].code) == ("system-exit", 0)
    assert "usage: pnk" in report.output
    assert "pinakes.cli" in report.modules  # the snapshot is of a process that did run the CLI
    assert loaded(report, NOT_FOR_HELP) == []


def test_init_and_doctor_load_no_model_backend(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    report = run_in_fresh_process([
        Step(argv=("init", str(kb), "--name", "lazy")),
        Step(argv=("-C", str(kb), "doctor")),
        Step(argv=("-C", str(tmp_path), "doctor", "--json")),  # outside a KB: environment only
    ])

    assert [(o.kind, o.code in (0, 1)) for o in report.outcomes] == [("exit", True)] * 3, report.summary()
    assert report.outcomes[0].code == 0, report.output
    assert loaded(report, MODEL_BACKENDS) == []


def test_the_sync_writer_reads_the_text_layer_without_loading_search() -> None:
    """A no-op sync imports the embed step, which needs the CJK shadow text and the tokenizer's term
    counts. Both live in the neutral text layer (pinakes.lexical); search is read-only, and none of
    it (core, BM25 planning, results) is the writer's to pay for."""
    import json
    import subprocess
    import sys

    code = ("import json, sys; import pinakes.rules.embed; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('pinakes.search', 'pinakes.lexical')))))")
    modules = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                        check=True).stdout)
    assert {"pinakes.lexical.scripts", "pinakes.lexical.tokenizer"} <= set(modules)
    assert [name for name in modules if name.startswith("pinakes.search")] == []
