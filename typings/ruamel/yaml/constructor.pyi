# ruamel.yaml's constructors, as far as registering one for a tag (see main.pyi for why these stubs exist).
from collections.abc import Callable
from typing import Self, TypeVar

from ruamel.yaml.nodes import Node

_NodeT = TypeVar("_NodeT", bound=Node)

class BaseConstructor:
    # ruamel calls `constructor(self, node)` with the node of the tag it is registered for.
    @classmethod
    def add_constructor(cls, tag: str, constructor: Callable[[Self, _NodeT], object]) -> None: ...

class SafeConstructor(BaseConstructor): ...
class RoundTripConstructor(SafeConstructor): ...
