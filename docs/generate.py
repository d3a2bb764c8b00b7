#!/usr/bin/env python3
"""Regenerate the parts of the docs whose truth is the code; `--check` fails when they drift.

    python docs/generate.py          rewrite the generated regions in place
    python docs/generate.py --check  change nothing; print a diff and exit 1 if any region is stale

Only the regions between `<!-- generated: KIND ARGS -->` and `<!-- end generated -->` are written;
the prose around them is the author's and is never touched. The regions:

| Marker | Page | Generated from |
|---|---|---|
| `cli pnk` | CLI.md | the top-level parser: its usage, flags and the table of commands |
| `cli pnk NAME` | CLI.md | each subcommand of `pinakes.cli.build_parser()`: usage and every flag |
| `exit contract` | CLI.md | `pinakes.ci.contract.CONTRACT`: the exit codes and `--json` of sync, eval, doctor |
| `manifest SECTION` | MANIFEST.md | `SECTION_KEYS` and the section dataclasses: key, type, default; the values of `provider` and `executor` from embed/registry.py |
| `mcp tools` | GUIDE.md | `pinakes.serve.specs.TOOL_SPECS`: every tool and its arguments |
| `errors` | architecture.md | every `PinakesError` subclass under src/ (read with `ast`) |

A command or manifest section the code has and the page lacks gets a section appended (a heading
and its region), so nothing new can go undocumented; a region naming something the code no longer
has is reported, and the section is left for a person to remove. Two tables keep hand-written
columns: the manifest's "Validation" and "Why" and the MCP table's "Returns" are carried over,
row by row, from the committed page (keyed by the first column), so a new key or tool gets a row
with those cells empty, for its author to fill in.

Nothing here depends on the terminal: usage lines are formatted here, never by argparse's
width-dependent help formatter.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import os
import re
import sys
import textwrap
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
END = "<!-- end generated -->"
_REGION = re.compile(r"<!-- generated: (?P<key>[^>]*?) -->\n(?P<body>.*?)" + re.escape(END), re.DOTALL)


# --- regions -------------------------------------------------------------------------------------


def _regions(text: str) -> dict[str, str]:
    return {match["key"]: match["body"] for match in _REGION.finditer(text)}


def _rewrite(text: str, render: Callable[[str, str], str | None]) -> str:
    """`text` with each region's body replaced by `render(key, old_body)` (None keeps it)."""

    def replace(match: re.Match[str]) -> str:
        body = render(match["key"], match["body"])
        return match[0] if body is None else f"<!-- generated: {match['key']} -->\n{body}{END}"

    return _REGION.sub(replace, text)


def _region(key: str, body: str) -> str:
    return f"<!-- generated: {key} -->\n{body}{END}\n"


def _cell(value: object) -> str:
    """One table cell: on one line, `|` escaped, and `<` outside code spans written `&lt;` (a help
    text's `<kb-ulid>` would otherwise be read as an HTML tag and vanish)."""
    spans = " ".join(str(value).split()).replace("|", "\\|").split("`")
    return "`".join(span if i % 2 else span.replace("<", "&lt;") for i, span in enumerate(spans))


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _kept_columns(body: str, count: int) -> dict[str, list[str]]:
    """The last `count` cells of each table row in `body`, by the row's first cell."""
    kept: dict[str, list[str]] = {}
    for line in body.splitlines():
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if len(cells) > count:
            kept[cells[0].strip("`")] = cells[-count:]
    return kept


def _code(value: object) -> str:
    return f"`{value}`"


# --- the CLI -------------------------------------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def commands(parser: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """Every subcommand, in the parser's order: name -> (its parser, its one-line help)."""
    sub = _subparsers(parser)
    helps = {action.dest: action.help or "" for action in sub._choices_actions}
    found: dict[str, tuple[argparse.ArgumentParser, str]] = {}
    seen: set[int] = set()
    for name, subparser in sub.choices.items():
        if id(subparser) not in seen:  # an alias maps to the same parser
            seen.add(id(subparser))
            found[name] = (subparser, helps.get(name, ""))
    return found


def _documented(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, argparse._HelpAction) and a.help != argparse.SUPPRESS]


def _metavar(action: argparse.Action, index: int = 0) -> str:
    metavar = action.metavar
    if isinstance(metavar, tuple):
        return metavar[index]
    if metavar is not None:
        return metavar
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return "{" + ",".join(str(choice) for choice in action.choices) + "}"
    return action.dest.upper() if action.option_strings else action.dest


def _arguments(action: argparse.Action) -> str:
    """What follows the flag, in argparse's notation (`N`, `[X]`, `A B`, `X [X ...]`)."""
    nargs = action.nargs
    if nargs == 0:
        return ""
    if nargs is None:
        return _metavar(action)
    if nargs == argparse.OPTIONAL:
        return f"[{_metavar(action)}]"
    if nargs == argparse.ZERO_OR_MORE:
        return f"[{_metavar(action)} ...]"
    if nargs == argparse.ONE_OR_MORE:
        return f"{_metavar(action)} [{_metavar(action)} ...]"
    if nargs == argparse.PARSER:  # the subcommand and its own arguments
        return f"{_metavar(action)} ..."
    if nargs == argparse.REMAINDER:
        return "..."
    return " ".join(_metavar(action, i) for i in range(int(nargs)))


def _usage_part(action: argparse.Action) -> str:
    if not action.option_strings:
        return _arguments(action)
    flag = action.option_strings[0]
    part = f"{flag} {_arguments(action)}".rstrip()
    return part if action.required else f"[{part}]"


def usage(prog: str, parser: argparse.ArgumentParser) -> str:
    if parser.usage:  # a command whose forms argparse cannot say (`pnk link`) writes its own
        lines = (parser.usage % {"prog": prog}).split("\n")
        # ... and a flag it does not mention still shows: the usage cannot drift from the parser
        unsaid = [_usage_part(a) for a in _documented(parser)
                  if not re.search(rf"(?<![\w-]){re.escape(_usage_part(a).strip('[]').split()[0])}(?![\w-])",
                                   parser.usage)]
        lines[0] = " ".join([lines[0], *unsaid])
        return "\n".join(lines)
    groups = {id(a): group for group in parser._mutually_exclusive_groups for a in group._group_actions}
    parts: list[str] = []
    done: set[int] = set()
    actions = _documented(parser)
    for action in sorted(actions, key=lambda a: not a.option_strings):  # options first, as argparse
        group = groups.get(id(action))
        if group is None:
            parts.append(_usage_part(action))
        elif id(group) not in done:
            done.add(id(group))
            members = [a for a in group._group_actions if a in actions]
            inner = " | ".join(_usage_part(a).removeprefix("[").removesuffix("]") for a in members)
            parts.append(f"({inner})" if group.required else f"[{inner}]")
    return " ".join([prog, *parts])


def _default(action: argparse.Action) -> str:
    if action.nargs == argparse.OPTIONAL and action.option_strings and action.const is not None:
        return f"`{action.const}` when given without a value"
    default = action.default
    if (action.nargs == 0 or default is None or default is False or default == argparse.SUPPRESS
            or (isinstance(default, (list, tuple)) and not default)):
        return ""  # a switch, or nothing worth saying (a default of 0 is still said)
    return _code(default)


def _help(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if "%(" in text:
        params = {**vars(action), "prog": prog}
        if action.choices is not None:  # as argparse's own help says them
            params["choices"] = ", ".join(str(choice) for choice in action.choices)
        text = text % params
    return _cell(text)


def _flags_table(prog: str, parser: argparse.ArgumentParser) -> str:
    rows = []
    for action in _documented(parser):
        if isinstance(action, argparse._SubParsersAction):
            continue
        name = ", ".join(_code(s) for s in action.option_strings) or _code(_metavar(action))
        value = _arguments(action) if action.option_strings else ""
        rows.append([name, _cell(_code(value)) if value else "", _cell(_default(action)), _help(action, prog)])
    return _table(["Flag", "Value", "Default", "Description"], rows) if rows else "Takes no flags.\n"


def render_cli_command(name: str, parser: argparse.ArgumentParser) -> str:
    prog = f"pnk {name}"
    return f"```text\n{usage(prog, parser)}\n```\n\n{_flags_table(prog, parser)}"


def render_cli_top(parser: argparse.ArgumentParser) -> str:
    rows = [[f"[`pnk {name}`](#pnk-{name})", _cell(help_text)]
            for name, (_, help_text) in commands(parser).items()]
    return (f"```text\n{usage('pnk', parser)}\n```\n\n{_flags_table('pnk', parser)}\n"
            + _table(["Command", "What it does"], rows))


def render_exit_contract() -> str:
    """The exit-code and `--json` contract CI steps act on (`pinakes.ci.contract`), as one table."""
    from pinakes.ci.contract import CONTRACT

    rows = [[f"`pnk {o.command}`", str(o.exit_code), _cell(o.meaning), _cell(o.json)] for o in CONTRACT]
    return _table(["Command", "Exit code", "When", "`--json` prints (stdout)"], rows)


def cli_page(text: str, parser: argparse.ArgumentParser, problems: list[str]) -> str:
    found = commands(parser)

    def render(key: str, _body: str) -> str | None:
        if key == "exit contract":
            return render_exit_contract()
        words = key.split()
        if words[:1] != ["cli"]:
            return None
        if words == ["cli", "pnk"]:
            return render_cli_top(parser)
        name = " ".join(words[2:])
        if words[1] != "pnk" or name not in found:
            problems.append(f"docs/CLI.md documents `{' '.join(words[1:])}`, which `pnk` does not have: "
                            "remove its section")
            return None
        return render_cli_command(name, found[name][0])

    text = _rewrite(text, render)
    present = set(_regions(text))
    for name, (subparser, _) in found.items():
        if f"cli pnk {name}" not in present:
            # The command's description seeds the prose; from then on the prose is the author's.
            description = textwrap.fill(" ".join((subparser.description or "").split()), width=100)
            text = (text.rstrip("\n") + f"\n\n## `pnk {name}`\n\n"
                    + (f"{description}\n\n" if description else "")
                    + _region(f"cli pnk {name}", render_cli_command(name, subparser)))
    return text


# --- the manifest --------------------------------------------------------------------------------

# Where a default is computed by the reader rather than declared on the dataclass, or is too long to
# print, the words for it. Everything else comes from the dataclass field itself.
_DEFAULT_WORDS = {
    ("rerank", "provider"): "the `[embedding]` provider",
    ("rerank", "batch_size"): '`16`; `32` with provider `"http"`',
    ("sources", "include"): "every extension that has a source type",
}


def _registered_choices(section: str, key: str) -> str | None:
    """The values a key backed by a registry accepts (embed/registry.py), in words: the names
    registered today, so the reference lists a provider the moment it is registered."""
    from pinakes.embed.registry import EXECUTORS, PROVIDERS, RERANKERS

    registry = {("embedding", "provider"): PROVIDERS, ("embedding", "executor"): EXECUTORS,
                ("rerank", "provider"): RERANKERS}.get((section, key))
    if registry is None:
        return None
    names = [_code(f'"{name}"') for name in registry]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _validation(section: str, key: str, kept: str) -> str:
    """The Validation cell: a registry-backed key's choices, then what the page adds after them
    (its text past the first "; "); any other key's cell as the page has it."""
    choices = _registered_choices(section, key)
    if choices is None:
        return kept
    _, _, rest = kept.partition("; ")
    return f"{choices}; {rest}" if rest else choices


def manifest_sections() -> dict[str, type]:
    """Each manifest section that holds keys -> its dataclass, resolved through `Manifest`'s fields:
    `retrieval.confidence` is `RetrievalSection.confidence`; `links.kb` is the element of the array
    `Manifest.links` (the `[[links.kb]]` tables), and `[links]` itself holds only that array."""
    from pinakes.manifest import SECTION_KEYS, Manifest

    found: dict[str, type] = {}
    for section in SECTION_KEYS:
        first, *rest = section.split(".")
        hint: Any = typing.get_type_hints(Manifest)[first]
        for part in rest:
            if typing.get_origin(hint) is tuple:  # an array of tables: its element
                hint = typing.get_args(hint)[0]
            else:
                hint = typing.get_type_hints(_optional(hint))[part]
        cls = _optional(hint)
        if dataclasses.is_dataclass(cls) and isinstance(cls, type):
            found[section] = cls
    return found


def _optional(hint: Any) -> Any:
    """X for `X | None`, else the hint itself."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return hint


def _type_words(hint: Any) -> str:
    hint = _optional(hint)
    if dataclasses.is_dataclass(hint):
        return "table"
    if typing.get_origin(hint) is tuple:
        return f"array of {_type_words(typing.get_args(hint)[0])}s"
    words = {str: "string", int: "integer", bool: "boolean", float: "number", Decimal: "amount"}
    return words.get(hint, getattr(hint, "__name__", str(hint)))


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, Decimal)):
        return f'"{value}"'
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    return str(value)


def _field_default(section: str, field: dataclasses.Field[Any]) -> str:
    if (section, field.name) in _DEFAULT_WORDS:
        return _DEFAULT_WORDS[section, field.name]
    if field.default is not dataclasses.MISSING:
        return "absent" if field.default is None else _code(_toml(field.default))
    if field.default_factory is not dataclasses.MISSING:
        return _code(_toml(field.default_factory()))
    return "required"


def render_manifest_section(section: str, cls: type, old_body: str, problems: list[str]) -> str:
    from pinakes.manifest import SECTION_KEYS

    fields = {f.name: f for f in dataclasses.fields(cls)}
    if tuple(fields) != SECTION_KEYS[section]:
        problems.append(f"[{section}]: SECTION_KEYS lists {SECTION_KEYS[section]} but {cls.__name__} "
                        f"has the fields {tuple(fields)}")
    hints = typing.get_type_hints(cls)
    kept = _kept_columns(old_body, 2)
    rows = []
    for name, field in fields.items():
        validation, why = kept.get(name, ["", ""])
        rows.append([_code(name), _type_words(hints[name]), _field_default(section, field),
                     _validation(section, name, validation), why])
    return _table(["Key", "Type", "Default", "Validation", "Why"], rows)


def manifest_page(text: str, problems: list[str]) -> str:
    sections = manifest_sections()

    def render(key: str, body: str) -> str | None:
        words = key.split()
        if words[:1] != ["manifest"]:
            return None
        if len(words) != 2 or words[1] not in sections:
            problems.append(f"docs/MANIFEST.md documents `{' '.join(words[1:])}`, which the manifest does "
                            "not have: remove its section")
            return None
        return render_manifest_section(words[1], sections[words[1]], body, problems)

    text = _rewrite(text, render)
    present = set(_regions(text))
    for section, cls in sections.items():
        if f"manifest {section}" not in present:
            text = (text.rstrip("\n") + f"\n\n## `[{section}]`\n\n"
                    + _region(f"manifest {section}", render_manifest_section(section, cls, "", problems)))
    return text


# --- the MCP tools -------------------------------------------------------------------------------


def _schema_type(schema: dict[str, Any]) -> str:
    kind = schema.get("type", "")
    if kind == "array":
        return f"array of {_schema_type(schema.get('items', {}))}s"
    return str(kind)


def _constraints(schema: dict[str, Any]) -> str:
    parts = []
    if "enum" in schema:
        parts.append("one of " + ", ".join(_code(v) for v in schema["enum"]))
    if "pattern" in schema:
        parts.append(f"matches `{schema['pattern']}`")
    if schema.get("minLength") == 1:
        parts.append("not empty")
    for key, words in (("minLength", "at least {} characters"), ("maxLength", "at most {} characters"),
                       ("minimum", ">= {}"), ("maximum", "<= {}"), ("maxItems", "at most {} items")):
        if key in schema and not (key == "minLength" and schema[key] == 1):
            parts.append(words.format(f"{schema[key]:,}"))
    return "; ".join(parts)


def render_mcp_tools(specs: Sequence[Any], old_body: str) -> str:
    kept = _kept_columns(old_body.split("\n\n", 1)[0], 1)
    summary = []
    for spec in specs:
        properties = spec.input_schema.get("properties", {})
        required = [name for name in properties if name in spec.input_schema.get("required", ())]
        optional = [name for name in properties if name not in required]
        arguments = "; ".join(part for part in (
            ", ".join(_code(name) for name in required),
            "optional " + ", ".join(_code(name) for name in optional) if optional else "",
        ) if part) or "none"
        summary.append([_code(spec.name), _cell(spec.title), arguments, kept.get(spec.name, [""])[0]])
    out = [_table(["Tool", "Title", "Arguments", "Returns"], summary)]
    for spec in specs:
        properties = spec.input_schema.get("properties", {})
        if not properties:
            out.append(f"`{spec.name}` takes no arguments.\n")
            continue
        required = set(spec.input_schema.get("required", ()))
        rows = [[_code(name), _schema_type(schema), "yes" if name in required else "",
                 _cell(_constraints(schema)), _cell(schema.get("description", ""))]
                for name, schema in properties.items()]
        out.append(f"Arguments of `{spec.name}`:\n\n"
                   + _table(["Argument", "Type", "Required", "Constraints", "Description"], rows))
    return "\n".join(out)


def mcp_page(text: str, specs: Sequence[Any], problems: list[str]) -> str:
    def render(key: str, body: str) -> str | None:
        return render_mcp_tools(specs, body) if key == "mcp tools" else None

    text = _rewrite(text, render)
    if "mcp tools" not in _regions(text):
        problems.append("docs/GUIDE.md has no `<!-- generated: mcp tools -->` region")
    return text


# --- the errors ----------------------------------------------------------------------------------


def _python_files() -> list[Path]:
    """Every module under src/pinakes."""
    files: list[Path] = []
    for directory, subdirs, names in os.walk(ROOT / "src" / "pinakes"):
        subdirs.sort()
        files += [Path(directory) / name for name in sorted(names) if name.endswith(".py")]
    return files


def error_classes() -> list[tuple[str, str, str, int | str, str]]:
    """(class, base, exit code, defining file, docstring's first line) for each PinakesError."""
    classes: dict[str, tuple[str, str, str | int | None, str]] = {}
    exit_names: dict[str, int] = {}
    for path in _python_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        relpath = path.relative_to(ROOT).as_posix()
        for node in tree.body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id.startswith("EXIT_") and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, int)):
                exit_names[node.targets[0].id] = node.value.value
            if not isinstance(node, ast.ClassDef) or not node.bases:
                continue
            base = node.bases[0]
            base_name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
            code: str | int | None = None
            for item in node.body:
                if (isinstance(item, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "exit_code"
                                                         for t in item.targets)):
                    value = item.value
                    code = value.id if isinstance(value, ast.Name) else getattr(value, "value", None)
            doc = (ast.get_docstring(node) or "").split("\n\n")[0]
            classes[node.name] = (base_name, relpath, code, " ".join(doc.split()))

    def is_error(name: str) -> bool:
        return name == "PinakesError" or (name in classes and is_error(classes[name][0]))

    def exit_code(name: str) -> int | str:
        base, _, code, _ = classes[name]
        if code is None:  # inherited
            return exit_code(base) if base in classes else "?"
        return exit_names.get(code, code) if isinstance(code, str) else code

    found = [(name, base, relpath, exit_code(name), doc) for name, (base, relpath, _, doc) in classes.items()
             if is_error(name)]
    # errors.py first, in its own order; then the others by file.
    return sorted(found, key=lambda row: (row[2] != "src/pinakes/errors.py", row[2]))


def render_errors() -> str:
    rows = [[_code(name), _code(base) if base != "Exception" else "", str(code), _code(relpath), _cell(doc)]
            for name, base, relpath, code, doc in error_classes()]
    return _table(["Error", "Base", "Exit code", "Defined in", "Meaning"], rows)


def architecture_page(text: str, problems: list[str]) -> str:
    text = _rewrite(text, lambda key, _body: render_errors() if key == "errors" else None)
    if "errors" not in _regions(text):
        problems.append("docs/architecture.md has no `<!-- generated: errors -->` region")
    return text


# --- the whole --------------------------------------------------------------------------------------


def expected(root: Path = ROOT, *, parser: argparse.ArgumentParser | None = None,
             tool_specs: Sequence[Any] | None = None) -> tuple[dict[Path, str], list[str]]:
    """What each generated page should hold, and the problems no rewrite can fix.

    `parser` and `tool_specs` default to the real ones; tests pass altered ones."""
    if parser is None:
        from pinakes.cli import build_parser

        parser = build_parser()
    if tool_specs is None:
        from pinakes.serve.specs import TOOL_SPECS

        tool_specs = TOOL_SPECS
    problems: list[str] = []
    docs = root / "docs"
    pages = {
        docs / "CLI.md": lambda text: cli_page(text, parser, problems),
        docs / "MANIFEST.md": lambda text: manifest_page(text, problems),
        docs / "GUIDE.md": lambda text: mcp_page(text, tool_specs, problems),
        docs / "architecture.md": lambda text: architecture_page(text, problems),
    }
    return {path: render(path.read_text(encoding="utf-8")) for path, render in pages.items()}, problems


def check(root: Path = ROOT, **sources: Any) -> list[str]:
    """A unified diff per stale page plus each problem; empty when the docs match the code."""
    pages, problems = expected(root, **sources)
    out = []
    for path, text in pages.items():
        current = path.read_text(encoding="utf-8")
        if current != text:
            name = path.relative_to(root).as_posix()
            out.append("".join(difflib.unified_diff(current.splitlines(keepends=True), text.splitlines(keepends=True),
                                                    f"{name} (committed)", f"{name} (generated)")))
    return out + problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; print a diff and exit 1 when a generated region is stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = check()
        for item in stale:
            print(item, file=sys.stderr)
        if stale:
            print("docs are stale: run `python docs/generate.py` (or `doit docs`) and commit the result",
                  file=sys.stderr)
        return 1 if stale else 0
    pages, problems = expected()
    for path, text in pages.items():
        if path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT).as_posix()}")
    for problem in problems:
        print(f"generate.py: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))  # run from a checkout without an install, too
    sys.exit(main())
