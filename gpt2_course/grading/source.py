"""The package as a submission's process sees it: the course's source with nothing to borrow.

The grader reads the package's Python files once, before any submission runs. A submission's
process imports its own copy of them, changed in two ways:

- no question bank: `gpt2_course/exercises/` holds only an empty `__init__.py`, so no reference
  answer and no planted mistake exists in the process or on its disk (the worker gets the test
  cases it runs from the grader, plans.py);
- the exercise's answers stubbed: each package object a question of the exercise names in
  `course=` (chapter 5's `causal_mask`, chapter 9's `LayerCache`, ...) is replaced, in the source,
  by a stand-in of the same name that raises `Unavailable`. Everything else stays, so an answer may
  build on earlier chapters; one that calls the course's own answer gets "borrowed".

    >>> text = stub(b"def causal_mask(t):\\n    return t\\n", "causal_mask", "masking.causal_mask")
    >>> print(text.decode().splitlines()[0])
    def causal_mask(*args, **kwargs):
"""
from __future__ import annotations

import ast
from pathlib import Path

from gpt2_course.grading.questions import BANKS, get_exercise

PACKAGE = "gpt2_course"
NO_BANKS = (b'"""No question banks here: the grader keeps them, and sends a submission only the test '
            b'cases it runs."""\n')
_DEF = '''def {name}(*args, **kwargs):
    """Not available while this exercise is graded: {what} is one of its answers."""
    from gpt2_course.grading.questions import Unavailable

    raise Unavailable("{what}")
'''
_CLASS = '''class {name}:
    """Not available while this exercise is graded: {what} is one of its answers."""

    def __init__(self, *args, **kwargs):
        from gpt2_course.grading.questions import Unavailable

        raise Unavailable("{what}")
'''


def snapshot(package: Path) -> dict[str, bytes]:
    """The package's Python source, read once: relative path ("gpt2_course/masking.py") -> bytes."""
    return {p.relative_to(package.parent).as_posix(): p.read_bytes() for p in sorted(package.rglob("*.py"))}


def data_dirs(package: Path) -> list[Path]:
    """The package's folders of data and no code (the pocket model's weights): a submission's copy
    links to them, read-only where the machine allows."""
    return sorted(d for d in package.iterdir() if d.is_dir() and d.name != "__pycache__"
                  and not any(d.rglob("*.py")))


def imports(files: dict[str, bytes]) -> list[str]:
    """The modules outside the package that its modules import when loaded (torch, numpy,
    tiktoken, ...): the zygote imports them once, so that a worker's import of a chapter is fast."""
    found: set[str] = set()
    for data in files.values():
        todo = list(ast.parse(data).body)
        while todo:  # module level, inside `if` and `try` too, but not inside functions
            node = todo.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            todo += [n for n in ast.iter_child_nodes(node) if isinstance(n, ast.stmt)]
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module)
    return sorted(m for m in found if m.split(".")[0] not in (PACKAGE, "__future__"))


def stub(source: bytes, name: str, what: str) -> bytes:
    """`source` with its top-level definition of `name` (decorators included) replaced by a stand-in
    that raises Unavailable(what). Any other top-level binding of `name` is an error: it would
    survive the stub."""
    tree = ast.parse(source)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and n.name == name]
    others = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name
              and isinstance(n.ctx, ast.Store)]
    if len(defs) != 1 or others:
        raise ValueError(f"cannot stub {what}: its module must define it once, with def or class")
    node = defs[0]
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])
    lines = source.decode("utf-8").splitlines(keepends=True)
    text = (_CLASS if isinstance(node, ast.ClassDef) else _DEF).format(name=name, what=what)
    return "".join([*lines[: start - 1], text, *lines[node.end_lineno:]]).encode("utf-8")


def worker_source(files: dict[str, bytes], exercise_id: str | None) -> dict[str, bytes]:
    """The files a submission's process imports while `exercise_id` is graded (None: the grading
    engine alone, for the zygote)."""
    banks = BANKS.replace(".", "/") + "/"
    if exercise_id is None:
        keep = {k: v for k, v in files.items() if k.startswith(f"{PACKAGE}/grading/")}
        init = f"{PACKAGE}/__init__.py"
        return {init: files[init], banks + "__init__.py": NO_BANKS, **keep}
    out = {k: v for k, v in files.items() if not k.startswith(banks)}
    out[banks + "__init__.py"] = NO_BANKS
    for obj in get_exercise(exercise_id).course:
        module, name = obj.__module__, obj.__qualname__
        rel = module.replace(".", "/") + ".py"
        if not module.startswith(PACKAGE + ".") or "." in name or rel not in out:
            raise ValueError(f"{exercise_id}: course={module}.{name} is not a top-level object of a "
                             "package module")
        out[rel] = stub(out[rel], name, f"{module}.{name}")
    return out


def write(files: dict[str, bytes], root: Path, data: list[Path] = ()) -> Path:
    """Write `files` under root (folders 0755, files 0644: another user may read, none may write),
    with a link to each data folder. Returns the folder to put on sys.path."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        path.write_bytes(content)
        path.chmod(0o644)
    for d in data:
        (root / PACKAGE / d.name).symlink_to(d)
    for d in [root, *(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())]:
        d.chmod(0o755)
    return root
