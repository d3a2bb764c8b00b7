"""The package layers of docs/architecture.md, enforced: every import points down.

An AST scan of `src/pinakes` and of `rules/`, which the build maps into the package as `pinakes.rules`
(stdlib only, like the paid-path gate's scanner in `tests/paid_gate_harness.py`, so CI needs no
import-linter or grimp). It reads every
`import`/`from … import` statement, top-level and inside functions alike, because a function-level
import is as much a dependency as a top-level one; it only runs later. Imports inside an
`if TYPE_CHECKING:` block never run, they only name types: the layer rules (b)-(d) leave them out,
but a cycle through one is still a cycle a reader must follow, so (a) and (f) count them, and they
are counted and held to the layers on their own (g).

What it asserts:
(a) no cycle between packages, type-only imports included;
(b) each package imports only packages of its own layer or below (`LAYERS`, top first), and a
    package missing from `LAYERS` is an error of its own, so a new package must be placed;
(c) `sync` is imported by none of `search`, `serve`, `lexical`, `index` (read-only paths never
    reach the writer's driver, even where the layers alone would allow it);
(d) `pinakes.cli` is imported only by itself and `pinakes.__main__`, and the apps (serve, eval,
    doctor, ci, deep, upgrade, init) import none of each other;
(e) `importlib.import_module` / `__import__` appear only in the modules of `DYNAMIC_IMPORTERS`,
    and never with a literal name: a literal would hide a static dependency from this scan;
(f) no two modules of one package import each other, even through others, however they import (at
    the top, inside a function, for types only; a package's `__init__` is one of its modules);
(g) the type-only imports, counted by package (reported as the test's `type_only_imports`
    property), point down the layers as run-time imports must.
Self-tests plant an upward import, a cycle and a literal `import_module` in a throwaway tree and
check that each is reported, naming the module and line.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "pinakes"
# Folders outside src/ that the build maps into the package (pyproject.toml `package-dir`), read here
# as the packages they become. templates/ holds no code.
MAPPED = {"pinakes.rules": SRC.parent.parent / "rules"}

# Top layer first. A package may import its own layer (without a cycle) or any layer below.
# "" is the package root, pinakes/__init__.py; a top-level module (errors.py) is a package of one.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__main__",),
    ("cli",),
    ("serve", "eval", "doctor", "ci", "deep", "upgrade", "init"),  # the apps
    ("sync",),  # the driver: run_sync, the doit runner, status, estimate
    ("calibration",),  # the evidence model's fit and self-calibration: eval and the sync both call it
    ("rules",),  # doit adapters of the stages
    ("pipeline",),  # the stage cores and their run context
    ("links", "search"),
    ("sources",),  # the walk of the source roots
    ("vectors",),  # the approximate vector file beside the index
    ("index",),
    ("manifest",),
    ("embed",),  # below the manifest, whose validation reads its registry (embed/registry.py)
    ("extract",),
    ("paid",),
    ("budget",),
    ("sidecar", "chunking", "lexical"),
    ("", "errors", "kb", "ids", "atomic", "wording", "display", "faults", "distribution", "outputs",
     "template_catalog", "hooks", "jsontypes", "http_json"),
)

APPS = LAYERS[2]

# Packages that must never import `sync`, whatever their layer.
NEVER_IMPORT_SYNC = ("search", "serve", "lexical", "index")

# Where loading a module by a name from data is the design (the name is never a literal).
DYNAMIC_IMPORTERS = frozenset({
    "pinakes.cli",  # the command modules, by command name
    "pinakes.doctor",  # the check modules of CHECK_MODULES
    "pinakes.embed.registry",  # a provider's or reranker's `load`, named by its registry entry
    "pinakes.extract.isolation",  # the extractor a child process runs, named by its parent
    "pinakes.pipeline.extract",  # the extractor module of the registry's spec
    "pinakes.rules",  # each declared stage's adapter module, by the stage's key (pipeline/stages.py)
})

# Upward or forbidden edges whose cut is in flight in #27, each naming the work package that owns
# it. An entry whose edge is gone fails the test, so the list only shrinks; it must end empty.
PENDING: Mapping[tuple[str, str], str] = {}

# Dynamic imports still in a module outside DYNAMIC_IMPORTERS, with the owner of their move.
PENDING_DYNAMIC: Mapping[str, str] = {}


@dataclass(frozen=True)
class Edge:
    importer: str  # dotted module name
    line: int
    imported: str  # dotted module name
    type_only: bool = False  # inside `if TYPE_CHECKING:`

    @property
    def where(self) -> str:
        return f"{self.importer}:{self.line}"


def package_of(module: str) -> str:
    """`pinakes.search.core` -> `search`; `pinakes.errors` -> `errors`; `pinakes` -> ``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def modules_under(src: Path) -> dict[str, Path]:
    """Dotted name -> file for every module of the package rooted at `src` (for the real one, with the
    folders the build maps into it)."""
    found: dict[str, Path] = {}
    roots = [(src.name, src), *(MAPPED.items() if src == SRC else ())]
    for dotted, root in roots:
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = [*dotted.split("."), *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of every node inside an `if TYPE_CHECKING:` block (the else branch runs, so it counts)."""
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                hidden.update(id(inner) for inner in ast.walk(child))
    return hidden


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules: Mapping[str, Path]) -> set[str]:
    """The modules an import statement loads: `from a import b` is `a.b` when that is a module, else `a`."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join([*base, *([node.module] if node.module else [])])
    else:
        source = node.module or ""
    return {f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source for alias in node.names}


def import_edges(src: Path, *, type_only: bool = False) -> list[Edge]:
    """Every run-time import of one module of the package by another; with `type_only`, the imports
    under TYPE_CHECKING too, flagged."""
    modules = modules_under(src)
    edges: list[Edge] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        hidden = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or (id(node) in hidden and not type_only):
                continue
            for target in sorted(_targets(node, module, path.name == "__init__.py", modules)):
                if target in modules:
                    edges.append(Edge(module, node.lineno, target, id(node) in hidden))
    return edges


def package_edges(edges: list[Edge]) -> dict[tuple[str, str], list[Edge]]:
    """(importing package, imported package) -> the statements that make the edge, once each."""
    found: dict[tuple[str, str], list[Edge]] = {}
    for edge in edges:
        pair = (package_of(edge.importer), package_of(edge.imported))
        statements = found.setdefault(pair, []) if pair[0] != pair[1] else []
        if all(known.where != edge.where for known in statements):
            statements.append(edge)
    return {pair: statements for pair, statements in found.items() if statements}


def package_cycles(pairs: list[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one package (Tarjan, iterative)."""
    graph: dict[str, list[str]] = {}
    for a, b in pairs:
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def module_cycles(edges: list[Edge]) -> list[list[str]]:
    """The sets of modules of one package that reach one another through imports within it."""
    return package_cycles([(edge.importer, edge.imported) for edge in edges
                           if package_of(edge.importer) == package_of(edge.imported) and edge.importer != edge.imported])


def type_only_counts(edges: list[Edge]) -> dict[str, int]:
    """Type-only import statements by importing package ('pinakes' for the root), most first."""
    counts: dict[str, int] = {}
    for where in sorted({(edge.importer, edge.line) for edge in edges if edge.type_only}):
        package = package_of(where[0]) or "pinakes"
        counts[package] = counts.get(package, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def layer_violations(edges: list[Edge], layers: tuple[tuple[str, ...], ...]) -> dict[tuple[str, str], list[str]]:
    """Edges from a package to a higher layer, or touching a package no layer names."""
    rank = {package: number for number, layer in enumerate(layers) for package in layer}
    found: dict[tuple[str, str], list[str]] = {}
    for (importer, imported), statements in package_edges(edges).items():
        unplaced = importer not in rank or imported not in rank
        if unplaced or rank[imported] < rank[importer]:
            found[(importer, imported)] = [edge.where for edge in statements]
    return found


def forbidden_imports(edges: list[Edge]) -> dict[tuple[str, str], list[str]]:
    """(c) and (d): sync from a read-only package, the CLI from outside it, one app from another."""
    found: dict[tuple[str, str], list[str]] = {}
    for (importer, imported), statements in package_edges(edges).items():
        reads_sync = imported == "sync" and importer in NEVER_IMPORT_SYNC
        reads_cli = imported == "cli" and importer != "__main__"
        reads_app = importer in APPS and imported in APPS
        if reads_sync or reads_cli or reads_app:
            found[(importer, imported)] = [edge.where for edge in statements]
    return found


def _dynamic_name(call: ast.Call) -> str | None:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name if name in ("import_module", "__import__") else None


def dynamic_imports(src: Path) -> list[tuple[str, int, bool]]:
    """(module, line, literal name?) for each `import_module`/`__import__` call of the package."""
    found: list[tuple[str, int, bool]] = []
    for module, path in modules_under(src).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Call) and _dynamic_name(node):
                literal = bool(node.args) and isinstance(node.args[0], ast.Constant)
                found.append((module, node.lineno, literal))
    return found


def _describe(found: Mapping[tuple[str, str], list[str]]) -> str:
    return "\n".join(f"  {a or 'pinakes'} -> {b or 'pinakes'}: {', '.join(where)}"
                     for (a, b), where in sorted(found.items()))


# --- the tree as it is ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def edges() -> list[Edge]:
    return import_edges(SRC)


@pytest.fixture(scope="module")
def all_edges() -> list[Edge]:
    """The run-time imports and the type-only ones."""
    return import_edges(SRC, type_only=True)


def test_no_two_packages_import_each_other_even_through_others(all_edges: list[Edge]) -> None:
    pairs = [pair for pair in package_edges(all_edges) if pair not in PENDING]
    cycles = package_cycles(pairs)
    by_pair = package_edges(all_edges)
    detail = _describe({pair: [e.where for e in by_pair[pair]] for pair in by_pair
                        if any(pair[0] in c and pair[1] in c for c in cycles)})
    assert cycles == [], f"package cycles {cycles}; the imports that close them:\n{detail}"


def test_every_import_points_to_its_own_layer_or_below(edges: list[Edge]) -> None:
    violations = {pair: where for pair, where in layer_violations(edges, LAYERS).items() if pair not in PENDING}
    assert violations == {}, (
        "imports of a higher layer (docs/architecture.md, 'Layers'; a package no layer names must be "
        f"placed in tests/test_layers.py LAYERS):\n{_describe(violations)}")


def test_sync_is_never_reached_from_a_read_path_the_cli_from_nothing_and_no_app_from_another(edges: list[Edge]) -> None:
    found = {pair: where for pair, where in forbidden_imports(edges).items() if pair not in PENDING}
    assert found == {}, f"forbidden imports:\n{_describe(found)}"


def test_no_two_modules_of_a_package_import_each_other_even_through_others(all_edges: list[Edge]) -> None:
    cycles = module_cycles(all_edges)
    detail = "\n".join(f"  {edge.where} -> {edge.imported}{' (type-only)' if edge.type_only else ''}"
                       for edge in all_edges if any(edge.importer in c and edge.imported in c for c in cycles))
    assert cycles == [], f"module cycles {cycles}; the imports that close them:\n{detail}"


def test_type_only_imports_are_counted_and_point_down_the_layers(
        all_edges: list[Edge], record_property: Callable[[str, object], None]) -> None:
    type_only = [edge for edge in all_edges if edge.type_only]
    counts = type_only_counts(all_edges)
    record_property("type_only_imports", sum(counts.values()))
    record_property("type_only_imports_by_package", counts)
    assert sum(counts.values()) == len({(edge.importer, edge.line) for edge in type_only}) > 0
    upward = layer_violations(type_only, LAYERS)
    assert upward == {}, f"type-only imports of a higher layer:\n{_describe(upward)}"
    forbidden = forbidden_imports(type_only)
    assert forbidden == {}, f"forbidden type-only imports:\n{_describe(forbidden)}"


def test_modules_are_loaded_by_name_only_where_the_name_is_data() -> None:
    found = dynamic_imports(SRC)
    outside = [f"{module}:{line}" for module, line, _ in found
               if module not in DYNAMIC_IMPORTERS and module not in PENDING_DYNAMIC]
    literal = [f"{module}:{line}" for module, line, is_literal in found if is_literal]
    assert outside == [], f"import_module outside {sorted(DYNAMIC_IMPORTERS)}: {outside}"
    assert literal == [], f"import_module of a literal name hides a static import; import it: {literal}"


def test_each_pending_cut_is_still_uncut(edges: list[Edge]) -> None:
    """PENDING only shrinks: once a cut lands, its entry must go (the owner's commit removes it)."""
    live = set(package_edges(edges))
    stale = {pair: owner for pair, owner in PENDING.items() if pair not in live}
    assert stale == {}, f"these cuts have landed; remove them from PENDING: {stale}"
    dynamic = {module for module, _, _ in dynamic_imports(SRC)}
    gone = {module: owner for module, owner in PENDING_DYNAMIC.items() if module not in dynamic}
    assert gone == {}, f"these dynamic imports are gone; remove them from PENDING_DYNAMIC: {gone}"


def test_the_layers_name_every_package_once() -> None:
    named = [package for layer in LAYERS for package in layer]
    assert len(named) == len(set(named))
    on_disk = {package_of(module) for module in modules_under(SRC)}
    assert on_disk - set(named) == set(), "place these packages in LAYERS"


def test_the_folders_the_build_maps_in_are_read_as_their_package() -> None:
    modules = modules_under(SRC)
    assert {"pinakes.rules", "pinakes.rules.walk", "pinakes.rules.reverse_scan"} <= set(modules)
    assert modules["pinakes.rules"] == MAPPED["pinakes.rules"] / "__init__.py"
    assert not (SRC / "rules").exists()  # one home: the adapters live only at the top level


def test_the_layer_order_is_complete() -> None:
    """Once every cut of #27 has landed, nothing is pending."""
    assert not PENDING, f"cuts still in flight: {dict(PENDING)}"
    assert not PENDING_DYNAMIC, f"dynamic imports still to move: {dict(PENDING_DYNAMIC)}"


# --- the checker catches what it should (a throwaway package) -------------------------------------


def _plant(root: Path, files: Mapping[str, str]) -> Path:
    src = root / "pinakes"
    for name, text in files.items():
        path = src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for folder in [src, *(p for p in src.rglob("*") if p.is_dir())]:
        (folder / "__init__.py").touch()
    return src


TOY_LAYERS: tuple[tuple[str, ...], ...] = (("search",), ("index",), ("lexical",), ("errors",))


def test_a_planted_upward_import_is_named_with_its_line(tmp_path: Path) -> None:
    src = _plant(tmp_path, {
        "errors.py": "",
        "lexical/tokenizer.py": "from pinakes import errors\n",
        "index/terms.py": "from pinakes.lexical.tokenizer import x\n",
        "search/core.py": "from pinakes.index import terms\n",
    })
    assert layer_violations(import_edges(src), TOY_LAYERS) == {}
    (src / "index" / "documents.py").write_text(
        '"""Doc."""\n\n\ndef f():\n    from pinakes.search.core import g\n    return g\n', encoding="utf-8")
    assert layer_violations(import_edges(src), TOY_LAYERS) == {("index", "search"): ["pinakes.index.documents:5"]}


def test_a_type_checking_import_is_not_a_dependency_but_its_else_branch_is(tmp_path: Path) -> None:
    src = _plant(tmp_path, {
        "search/core.py": "",
        "index/documents.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                               "    from pinakes.search.core import Searcher\n"),
    })
    assert layer_violations(import_edges(src), TOY_LAYERS) == {}
    (src / "index" / "documents.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    pass\nelse:\n    from pinakes.search import core\n",
        encoding="utf-8")
    assert layer_violations(import_edges(src), TOY_LAYERS) == {("index", "search"): ["pinakes.index.documents:5"]}


def test_a_cycle_through_a_third_package_and_a_relative_import_is_found(tmp_path: Path) -> None:
    src = _plant(tmp_path, {
        "lexical/scripts.py": "from ..index import terms\n",
        "index/terms.py": "from pinakes.search import core\n",
        "search/core.py": "import pinakes.lexical.scripts\n",
    })
    assert package_cycles(list(package_edges(import_edges(src)))) == [["index", "lexical", "search"]]


def test_a_module_cycle_through_a_type_only_and_a_function_level_import_is_found(tmp_path: Path) -> None:
    src = _plant(tmp_path, {
        "index/a.py": "from pinakes.index.b import B\n",
        "index/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pinakes.index.c import C\n",
        "index/c.py": "def f():\n    from . import a\n",
        "index/d.py": "from pinakes.index import a\n",  # imports into the cycle, is not part of it
        "search/core.py": "from pinakes.index import d\n",
    })
    edges = import_edges(src, type_only=True)
    assert module_cycles(edges) == [["pinakes.index.a", "pinakes.index.b", "pinakes.index.c"]]
    assert module_cycles(import_edges(src)) == []  # without the type-only import there is none
    assert type_only_counts(edges) == {"index": 1}


def test_a_package_init_and_the_module_it_imports_back_are_a_cycle(tmp_path: Path) -> None:
    src = _plant(tmp_path, {
        "embed/loader.py": "import pinakes.embed\n",
        "embed/registry.py": "",
    })
    (src / "embed" / "__init__.py").write_text("from pinakes.embed import loader, registry\n", encoding="utf-8")
    assert module_cycles(import_edges(src)) == [["pinakes.embed", "pinakes.embed.loader"]]


def test_a_package_no_layer_names_and_a_forbidden_import_are_reported(tmp_path: Path) -> None:
    src = _plant(tmp_path, {
        "sync/engine.py": "",
        "cli/main.py": "",
        "serve/tools.py": "from pinakes.sync import engine\n",
        "eval/runner.py": "from pinakes.cli import main\n",
        "doctor/checks_index.py": "\n\nimport pinakes.eval.runner\n",
    })
    edges = import_edges(src)
    assert set(layer_violations(edges, TOY_LAYERS)) == {("serve", "sync"), ("eval", "cli"), ("doctor", "eval")}
    assert forbidden_imports(edges) == {("serve", "sync"): ["pinakes.serve.tools:1"],
                                        ("eval", "cli"): ["pinakes.eval.runner:1"],
                                        ("doctor", "eval"): ["pinakes.doctor.checks_index:3"]}


def test_a_literal_import_module_is_flagged_and_a_name_from_data_is_not(tmp_path: Path) -> None:
    src = _plant(tmp_path, {
        "doctor/checks.py": ("import importlib\nNAMES = ('a',)\n"
                             "def load():\n    return [importlib.import_module(n) for n in NAMES]\n"),
        "index/terms.py": "from importlib import import_module\nsearch = import_module('pinakes.search.core')\n",
    })
    assert sorted(dynamic_imports(src)) == [("pinakes.doctor.checks", 4, False), ("pinakes.index.terms", 2, True)]
