# The parts of ruamel.yaml (0.18/0.19) Pinakes uses, typed: ruamel writes its annotations against names
# it imports only under `if False:`, so a checker sees none of them. The sidecar package reads and
# rewrites sidecars through these (sidecar/dialect.py and sidecar/tree.py hold every call); front
# matter and golden sets are read with `YAML(typ="safe")`. Each stub says what the runtime does, no
# more: a value ruamel builds from a document is `object` until the caller has checked it.
from pathlib import Path
from typing import IO

from ruamel.yaml.constructor import BaseConstructor
from ruamel.yaml.nodes import Node
from ruamel.yaml.representer import BaseRepresenter

class YAML:
    Constructor: type[BaseConstructor]
    Representer: type[BaseRepresenter]
    preserve_quotes: bool | None
    width: int | None
    allow_duplicate_keys: bool
    max_depth: int  # 0.19: composing stops past this depth (0: no limit)
    explicit_start: bool | None
    explicit_end: bool | None
    @property
    def version(self) -> tuple[int, int] | None: ...
    @version.setter
    def version(self, val: str | tuple[int, int] | None) -> None: ...
    def __init__(
        self, *, typ: str | list[str] | None = None, pure: bool = False, output: object = None,
        plug_ins: list[str] | None = None,
    ) -> None: ...
    def compose(self, stream: str | Path | IO[str]) -> Node | None: ...
    def load(self, stream: str | Path | IO[str]) -> object: ...
    def dump(self, data: object, stream: IO[str] | Path | None = None) -> None: ...
    # `indent` is a property whose getter returns a bound method: this is the call it allows.
    def indent(self, mapping: int | None = None, sequence: int | None = None, offset: int | None = None) -> None: ...
