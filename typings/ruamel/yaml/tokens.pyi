# ruamel.yaml's comment token, which holds comment lines in a round-trip document (see main.pyi for
# why these stubs exist).
from ruamel.yaml.error import CommentMark, StreamMark

class Token:
    start_mark: StreamMark | CommentMark | None
    end_mark: StreamMark | None

class CommentToken(Token):
    def __init__(
        self, value: str, start_mark: StreamMark | CommentMark | None = None, end_mark: StreamMark | None = None,
        column: int | None = None,
    ) -> None: ...
    @property
    def value(self) -> str: ...  # the comment's text: "# ...\n", or blank lines ("\n")
    @value.setter
    def value(self, val: str) -> None: ...
