# ruamel.yaml's errors and marks (see main.pyi for why these stubs exist).
class StreamMark:
    name: object
    index: int  # 0-based offset in the text
    line: int  # 0-based
    column: int  # 0-based

class StringMark(StreamMark): ...

class CommentMark:
    column: int
    def __init__(self, column: int) -> None: ...

class YAMLError(Exception): ...

class MarkedYAMLError(YAMLError):
    context: str | None
    context_mark: StreamMark | None
    problem: str | None
    problem_mark: StreamMark | None
    note: str | None
