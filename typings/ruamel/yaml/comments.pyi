# ruamel.yaml's round-trip containers and the comments and style they carry (see main.pyi for why these
# stubs exist). Keys are what the document spelled (a sidecar's are strings: its reader refuses others).
from collections import OrderedDict
from collections.abc import Hashable, Iterable

from ruamel.yaml.tokens import CommentToken

# One entry's comments. A mapping's: [after its key, before its key, after its value, before its
# value]; a sequence item's: [after it, before it]. A "before" slot holds a list of tokens.
_Slots = list[CommentToken | list[CommentToken] | None]

class Comment:
    # [after the collection's start, [the lines before its first entry]], or None before any is set
    comment: _Slots | None
    @property
    def items(self) -> dict[Hashable, _Slots]: ...

class Format:
    def set_flow_style(self) -> None: ...
    def set_block_style(self) -> None: ...
    # True: flow (`[a, b]`), False: block, None: not set (the dumper decides)
    def flow_style(self, default: bool | None = None) -> bool | None: ...

class CommentedBase:
    @property
    def ca(self) -> Comment: ...
    @property
    def fa(self) -> Format: ...

class CommentedSeq(list[object], CommentedBase):
    def __init__(self, iterable: Iterable[object] = ..., /) -> None: ...

class CommentedMap(OrderedDict[Hashable, object], CommentedBase):
    def __init__(self, items: Iterable[tuple[Hashable, object]] = ..., /, **values: object) -> None: ...
    def insert(self, pos: int, key: Hashable, value: object, comment: str | None = None) -> None: ...
