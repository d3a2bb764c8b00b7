"""The paid-path gate's test harness (spec §1, §9): no module outside `.paid-path-allowlist` may import
a paid client. It lives in tests/, not in the `pinakes` package: nothing at run time uses it, and a
socket patcher has no place in an installed wheel.

Two proofs, both reading the one allowlist file so that tests, CI and scripts cannot drift apart:

- `unlisted_paid_importers(repo_root)` scans src/pinakes (and rules/) with `ast`. It names the
  offending file early, but only knows the spellings it looks for.
- `run_in_fresh_process(steps)` is the check that decides: it drives real `pnk` commands inside one
  fresh interpreter and reports what actually landed in `sys.modules`, however it got there.

This module imports only the standard library: it runs, as a script, inside the process it measures.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

ALLOWLIST_NAME = ".paid-path-allowlist"

# The SDKs that can spend money when called: the [claude] extra's client, and the [remote] extra's
# (`openai`: a remote embedding endpoint, free or priced, embed/provider_openai.py).
PAID_CLIENTS: tuple[str, ...] = ("anthropic", "openai")

# Source folders that end up in the `pinakes` package, and the package name each maps to.
SCANNED_ROOTS: tuple[tuple[str, str], ...] = (("src/pinakes", "pinakes"), ("rules", "pinakes.rules"))

_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_DYNAMIC_IMPORTERS = frozenset({"import_module", "__import__"})

# How long a background step (the MCP server) may start up before the snapshot is taken anyway.
BACKGROUND_WAIT_S = 10.0


def read_allowlist(path: Path) -> tuple[str, ...]:
    """The dotted module names in an allowlist file; `#` starts a comment."""
    entries: list[str] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if not _MODULE_NAME.match(line):
            raise ValueError(f"{path}:{number}: not a dotted module name: {line!r}")
        entries.append(line)
    return tuple(entries)


def is_paid_client(module: str) -> bool:
    return any(module == client or module.startswith(client + ".") for client in PAID_CLIENTS)


def paid_clients_in(modules: Iterable[str]) -> list[str]:
    return sorted(name for name in modules if is_paid_client(name))


def paid_imports(source: str, filename: str = "<source>") -> list[str]:
    """Paid-client modules that `source` imports: statements, and literal dynamic imports."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call) and _is_dynamic_import(node):
            first = node.args[0]
            names = [first.value] if isinstance(first, ast.Constant) and isinstance(first.value, str) else []
        else:
            continue
        found.extend(name for name in names if is_paid_client(name))
    return found


def _is_dynamic_import(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in _DYNAMIC_IMPORTERS and bool(call.args)


def packaged_modules(repo_root: Path) -> Iterable[tuple[str, Path]]:
    """(dotted module name, file) for every Python file the package is built from."""
    for folder, package in SCANNED_ROOTS:
        base = repo_root / folder
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join([package, *parts]), path


def unlisted_paid_importers(repo_root: Path) -> dict[str, list[str]]:
    """Modules outside the allowlist that import a paid client, with what each imports."""
    allowed = set(read_allowlist(repo_root / ALLOWLIST_NAME))
    offenders: dict[str, list[str]] = {}
    for module, path in packaged_modules(repo_root):
        if module in allowed:
            continue
        imported = paid_imports(path.read_text(encoding="utf-8"), str(path))
        if imported:
            offenders[module] = imported
    return offenders


# --- the behavioural gate --------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One thing the fresh process does: run `pnk ARGV`, or write a file (`write` = its path)."""

    argv: tuple[str, ...] = ()
    write: str | None = None
    text: str = ""
    background: bool = False  # run in a thread and move on after BACKGROUND_WAIT_S (a server)


@dataclass(frozen=True)
class StepOutcome:
    step: str
    kind: str  # exit (main returned) | system-exit (argparse) | not-built | crash | running | wrote
    code: int | None = None
    detail: str = ""


@dataclass(frozen=True)
class ProcessReport:
    outcomes: list[StepOutcome]
    modules: frozenset[str]
    output: str  # the process's stdout and stderr, for failure messages

    @property
    def paid_clients_loaded(self) -> list[str]:
        return paid_clients_in(self.modules)

    def outcome(self, step_prefix: str) -> StepOutcome:
        return next(o for o in self.outcomes if o.step.startswith(step_prefix))

    def summary(self) -> str:
        lines = [f"  {o.step}: {o.kind}{'' if o.code is None else f' {o.code}'}" for o in self.outcomes]
        return "\n".join(lines)


def free_path_steps(kb_dir: Path) -> list[Step]:
    """The free path a default agent surface can reach, over a fresh KB with a note and a PDF."""
    kb = str(kb_dir)
    return [
        Step(argv=("init", kb, "--name", "paid-gate")),
        Step(write=str(kb_dir / "docs" / "gate-note.md"),
             text="# Gate note\n\nThe free path indexes this note without spending anything.\n"),
        Step(write=str(kb_dir / "docs" / "gate.pdf"), text=minimal_pdf("The free path reads this PDF.")),
        Step(argv=("-C", kb, "sync")),
        Step(argv=("-C", kb, "search", "free path")),
        Step(argv=("-C", kb, "ask", "what does the free path index?")),  # without --deep: free
        Step(argv=("-C", kb, "doctor")),
        Step(argv=("-C", kb, "doit", "list")),
        Step(argv=("eval", kb)),
        Step(argv=("-C", kb, "serve"), background=True),
    ]


def run_in_fresh_process(
    steps: Sequence[Step], *, env: dict[str, str] | None = None, timeout: float = 300.0
) -> ProcessReport:
    """Run `steps` in one new interpreter (stdin closed, network refused) and report its modules."""
    with tempfile.TemporaryDirectory(prefix="pnk-gate-") as scratch:
        steps_file = Path(scratch) / "steps.json"
        report_file = Path(scratch) / "report.json"
        steps_file.write_text(json.dumps([asdict(step) for step in steps]), encoding="utf-8")
        completed = subprocess.run(
            # Run as a script by path: its folder (tests/) goes first on sys.path, which holds no
            # module that shadows one Pinakes or the standard library imports.
            [sys.executable, str(Path(__file__).resolve()), str(steps_file), str(report_file)],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
            env=env,
        )
        output = completed.stdout + completed.stderr
        if not report_file.exists():
            raise RuntimeError(f"the gate process wrote no report (exit {completed.returncode}):\n{output}")
        report = json.loads(report_file.read_text(encoding="utf-8"))
    outcomes = [StepOutcome(**item) for item in report["outcomes"]]
    return ProcessReport(outcomes, frozenset(report["modules"]), output)


def minimal_pdf(text: str, info: str | None = None) -> str:
    """A one-page PDF (ASCII, so it travels as text) whose native text layer holds `text`, with
    `info` (a PDF dictionary such as `<< /Title (Annual report) >>`) as its information dictionary."""
    content = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        "/Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(content)} >>\nstream\n{content}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    if info is not None:
        objects.append(info)
    pdf = "%PDF-1.4\n"
    offsets: list[int] = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(pdf))
        pdf += f"{number} 0 obj\n{body}\nendobj\n"
    xref_at = len(pdf)
    pdf += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n"
    pdf += "".join(f"{offset:010d} 00000 n \n" for offset in offsets)
    info_ref = f" /Info {len(objects)} 0 R" if info is not None else ""
    pdf += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{info_ref} >>\nstartxref\n{xref_at}\n%%EOF\n"
    return pdf


# --- inside the fresh process ----------------------------------------------------------------------


def _refuse_network() -> None:
    import socket

    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> None:
        host = str(cast("tuple[object, ...]", address)[0]) if isinstance(address, tuple) and address else "localhost"
        if not (host in ("localhost", "::1") or host.startswith("127.")):
            raise ConnectionRefusedError(f"the paid-path gate refuses network access ({address!r})")
        return real_connect(self, address)  # pyright: ignore[reportArgumentType]  # the caller's own address, unchanged

    socket.socket.connect = guarded


def _invoke(argv: list[str]) -> StepOutcome:
    import traceback

    from pinakes.cli import main

    label = "pnk " + " ".join(argv)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse: --help, or arguments a command does not take yet
        return StepOutcome(label, "system-exit", exc.code if isinstance(exc.code, int) else 2)
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("pinakes"):
            return StepOutcome(label, "not-built", detail=str(exc))
        return StepOutcome(label, "crash", detail=traceback.format_exc())
    except Exception:
        return StepOutcome(label, "crash", detail=traceback.format_exc())
    return StepOutcome(label, "exit", code)


def _invoke_in_background(argv: list[str]) -> StepOutcome:
    import threading

    result: list[StepOutcome] = []
    worker = threading.Thread(target=lambda: result.append(_invoke(argv)), daemon=True)
    worker.start()
    worker.join(BACKGROUND_WAIT_S)
    if result:
        return result[0]
    return StepOutcome("pnk " + " ".join(argv), "running", detail=f"still running after {BACKGROUND_WAIT_S}s")


def _run_steps(steps_file: Path, report_file: Path) -> None:
    _refuse_network()
    outcomes: list[StepOutcome] = []
    for item in json.loads(steps_file.read_text(encoding="utf-8")):
        fields: dict[str, Any] = {**item, "argv": tuple(item["argv"])}  # the JSON the parent wrote
        step = Step(**fields)
        if step.write is not None:
            target = Path(step.write)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(step.text, encoding="utf-8")
            outcomes.append(StepOutcome(f"write {target.name}", "wrote"))
        elif step.background:
            outcomes.append(_invoke_in_background(list(step.argv)))
        else:
            outcomes.append(_invoke(list(step.argv)))
    report = {"outcomes": [asdict(o) for o in outcomes], "modules": sorted(sys.modules)}
    report_file.write_text(json.dumps(report), encoding="utf-8")
    sys.stdout.flush()
    sys.stderr.flush()
    # A server thread may still be blocked on stdin; the snapshot is taken, so leave without joining it.
    os._exit(0)


if __name__ == "__main__":
    _run_steps(Path(sys.argv[1]), Path(sys.argv[2]))
