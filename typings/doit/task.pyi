class Task:
    name: str
    task_dep: list[str]
    has_subtask: bool
