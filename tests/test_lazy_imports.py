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


def test_a_no_op_sync_imports_only_what_it_uses(tmp_path: Path) -> None:
    """A no-op `pnk sync` is timed against a bare walk (bench/bench_sync.py, <= 3x), so its process
    registers only the sync command and loads no module it never calls: no other command's module,
    no link traversal, no budget accountant or ledger report (the manifest reads only the price
    table), no installed-distribution lookup (built only for a remedy). Each of these cost a
    10k-document no-op 5-35 ms (docs/perf/sync.md, section 3)."""
    import json
    import subprocess
    import sys

    from pinakes.init import init_kb
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync
    from tests.fakes import FakeEmbedder

    kb = tmp_path / "kb"
    init_kb(kb, name="lazy")
    (kb / "docs").mkdir(exist_ok=True)
    (kb / "docs" / "alpha.md").write_text("# Alpha\n\nAeroplanes and wings.\n", encoding="utf-8")
    run_sync(kb, SyncOptions(), embedder=FakeEmbedder())

    code = ("import json, sys; from pinakes.cli import main; code = main(['-C', sys.argv[1], 'sync', '-q']); "
            "print(json.dumps([code, sorted(sys.modules)]))")
    done = subprocess.run([sys.executable, "-c", code, str(kb)], capture_output=True, text=True, check=True)
    exit_code, modules = json.loads(done.stdout.splitlines()[-1])
    bare = subprocess.run([sys.executable, "-c", "import json, sys; print(json.dumps(sorted(sys.modules)))"],
                          capture_output=True, text=True, check=True)
    added = set(modules) - set(json.loads(bare.stdout))  # what the sync imported, not the interpreter's start

    assert exit_code == 0, done.stderr
    assert "pinakes.sync.engine" in modules and "pinakes.cli.cmd_sync" in modules  # it did sync
    commands = sorted(m for m in modules if m.startswith("pinakes.cli.cmd_"))
    assert commands == ["pinakes.cli.cmd_sync"]
    unused = {"pinakes.links.traverse", "pinakes.budget.accountant", "pinakes.budget.report",
              "pinakes.budget.ledger", "pinakes.search.core",
              "importlib.metadata",  # the installed distribution's origin, named only by a remedy
              "secrets", "socket"}  # a temp name's random part, the lock's host name: os has both
    assert sorted(unused & added) == []


def test_the_search_modules_leave_numpy_to_the_first_search() -> None:
    """A `pnk search` asks for one BLAS thread before NumPy loads (search/threads.py): no module it
    imports on the way may load NumPy, nor the MCP server's tools."""
    import subprocess
    import sys

    code = ("import sys, pinakes.search.core, pinakes.search.settings, pinakes.search.shared_ranks, "
            "pinakes.serve.tools; print('numpy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
