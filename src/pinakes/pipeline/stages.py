"""The sync pipeline, declared once: each stage's key, the stages it reads, and what it fans out over.

Both views of the pipeline are generated from this tuple by `pinakes.sync.loader`: the doit namespace
that `pnk doit list|info` (and `doit -f .pinakes/dodo.py`) show, and the doit invocations `pnk sync`
runs. An input becomes a doit `task_dep`: per item when the two stages fan out over the same thing
(`chunk:<doc>` reads `extract:<doc>`), on every task of the input within the same group when a
group-wide stage reads a per-document one (`embed:g00000` reads each `chunk:<doc>` of its group), and
on the input stage as a whole otherwise (`graph` reads all of `embed`).

The streamed stages run once per group of documents, in one doit invocation each, and a group's first
streamed stage waits for the previous group's last one: a group's text is committed before the next
group's is read, so memory follows the group, not the corpus. The stages declared before them decide
the change set and run together in the first invocation; each stage declared after them runs in an
invocation of its own.

Pure data: importing it costs nothing on a no-op sync (no numpy, no doit). Its records are
NamedTuples, immutable like a frozen dataclass and a tenth of the cost to define (a no-op sync reads
the declaration, and every class it defines at import is part of its time).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

# What one stage's tasks are one per: the whole run, a changed document, a group of documents (the
# unit of streaming and of commit batches), a connected KB.
Fanout = Literal["run", "document", "group", "partner"]


class Stage(NamedTuple):
    key: str  # the doit basename, and the word the sync report uses for the stage
    inputs: tuple[str, ...]  # the stages it reads; each becomes a task_dep
    fanout: Fanout
    streamed: bool = False  # runs inside each group's invocation


STAGES: tuple[Stage, ...] = (
    Stage("walk", (), "run"),
    Stage("pair", ("walk",), "run"),
    Stage("extract", ("pair",), "document", streamed=True),
    Stage("chunk", ("extract",), "document", streamed=True),
    Stage("embed", ("chunk",), "group", streamed=True),
    Stage("graph", ("pair", "embed"), "run"),
    Stage("vectors", ("embed",), "run"),
    Stage("reverse-scan", ("graph",), "partner"),
)


def stage(key: str) -> Stage:
    """The declared stage called `key`."""
    for declared in STAGES:
        if declared.key == key:
            return declared
    raise KeyError(f"no pipeline stage {key!r}")


class Phase(NamedTuple):
    """Stages that run in one doit invocation (per group, when `streamed`)."""

    label: str
    stages: tuple[Stage, ...]
    streamed: bool = False


def phases() -> tuple[Phase, ...]:
    """The invocations of a sync, in order: the stages before the streamed ones together ("plan"),
    the streamed ones (once per group), then each later stage alone."""
    first = next(index for index, declared in enumerate(STAGES) if declared.streamed)
    after = next(index for index in range(first, len(STAGES)) if not STAGES[index].streamed)
    return (Phase("plan", STAGES[:first]), Phase("group", STAGES[first:after], streamed=True),
            *(Phase(declared.key, (declared,)) for declared in STAGES[after:]))


def check_declaration(stages: tuple[Stage, ...] = STAGES) -> None:
    """Every input names an earlier stage, keys are unique, and the streamed stages are contiguous:
    what the generated views assume. Raises ValueError naming the stage."""
    seen: set[str] = set()
    for declared in stages:
        if declared.key in seen:
            raise ValueError(f"pipeline stage {declared.key!r} is declared twice")
        missing = [name for name in declared.inputs if name not in seen]
        if missing:
            raise ValueError(f"pipeline stage {declared.key!r} reads {missing}, not declared before it")
        seen.add(declared.key)
    flags = [declared.streamed for declared in stages]
    if True in flags and False in flags[flags.index(True):len(flags) - flags[::-1].index(True)]:
        raise ValueError("the streamed pipeline stages must be declared next to each other")
