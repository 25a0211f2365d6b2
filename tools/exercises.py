"""Generate the blank exercise notebooks and the book's exercise pages from the solutions.

Usage:
    python tools/exercises.py          # write exercises/NN.ipynb and book/exercises/NN.md
    python tools/exercises.py --check  # exit 1, saying what to run, if anything is stale

One source: `exercises/solutions/NN_name.ipynb` holds the questions and their solutions. In
its code cells
    name = expression  # SOLUTION                 becomes   name = ...  # your answer
    # BEGIN SOLUTION ... # END SOLUTION (a block)  becomes   raise NotImplementedError(...)
and markdown cells tagged `solution` (explanations) are dropped from the blank notebook.
The book page shows each question with the blank code and hides the solution in a dropdown.
The solutions must agree with the chapter's question bank, `gpt2_course/exercises/chNN_name.py`:
the same questions, names and points.
"""
from __future__ import annotations

import copy
import re
import sys
from pathlib import Path

import nbformat
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from export import run_cli  # noqa: E402  (tools/ is not a package)

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = "exercises/solutions"
BLANKS = "exercises"
PAGES = "book/exercises"
INDEX = "book/exercises/index.md"
TABLE_BEGIN, TABLE_END = "<!-- BEGIN exercises table (tools/exercises.py) -->", "<!-- END exercises table -->"

VALUE = re.compile(r"^(?P<indent>\s*)(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<expr>.+?)\s*#\s*SOLUTION\s*$")
BEGIN = re.compile(r"^(?P<indent>\s*)#\s*BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*#\s*END SOLUTION\s*$")
HEADING = re.compile(r"^## Question (?P<n>\d+) \((?P<points>\d+) points?\): ", re.M)
CHECK = re.compile(r"""^check\(\s*["'](?P<qid>q\d+)["']\s*\)\s*$""")
STUB = 'raise NotImplementedError("your code here")'


def blank_code(source: str) -> str:
    """The student's version of a solution cell."""
    out, inside = [], False
    for line in source.split("\n"):
        if m := BEGIN.match(line):
            if inside:
                raise ValueError("nested # BEGIN SOLUTION")
            inside = True
            out.append(m["indent"] + STUB)
        elif END.match(line):
            if not inside:
                raise ValueError("# END SOLUTION without # BEGIN SOLUTION")
            inside = False
        elif not inside:
            m = VALUE.match(line)
            out.append(f"{m['indent']}{m['name']} = ...  # your answer" if m else line)
    if inside:
        raise ValueError("# BEGIN SOLUTION without # END SOLUTION")
    return "\n".join(out)


def solution_code(source: str) -> str:
    """A solution cell without its markers, as the book shows it."""
    lines = [ln for ln in source.split("\n") if not (BEGIN.match(ln) or END.match(ln))]
    return "\n".join(re.sub(r"\s*#\s*SOLUTION\s*$", "", ln) for ln in lines)


def is_solution_cell(cell: dict) -> bool:
    return cell["cell_type"] == "code" and (blank_code(cell["source"]) != cell["source"])


def is_explanation(cell: dict) -> bool:
    return cell["cell_type"] == "markdown" and "solution" in cell.get("metadata", {}).get("tags", [])


def blank_notebook(solution: nbformat.NotebookNode, stem: str) -> nbformat.NotebookNode:
    nb = copy.deepcopy(solution)
    cells = []
    for cell in nb.cells:
        if is_explanation(cell):
            continue
        if cell.cell_type == "code":
            cell.source = blank_code(cell.source)
            cell.outputs, cell.execution_count = [], None
        cell.metadata.pop("execution", None)
        cells.append(cell)
    nb.cells = cells
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "gpt2_course": {"exercise": stem, "generated_from": f"{SOLUTIONS}/{stem}.ipynb"},
    }
    return nb


def _links(config: dict, stem: str) -> str:
    repo = config.get("repository", {})
    url, branch = repo.get("url", "").rstrip("/"), repo.get("branch", "main")
    path = f"{BLANKS}/{stem}.ipynb"
    parts = [f"{{download}}`Download the notebook <../../{path}>`"]
    if m := re.match(r"https://github\.com/([^/]+/[^/]+)$", url):
        launch = config.get("launch_buttons", {})
        if binder := launch.get("binderhub_url"):
            binder = f"{binder.rstrip('/')}/v2/gh/{m[1]}/{branch}?urlpath=lab/tree/{path}"
            parts.append(f"[open it on Binder]({binder})")
        if launch.get("colab_url"):
            parts.append(f"[open it in Colab](https://colab.research.google.com/github/{m[1]}/blob/{branch}/{path})")
    return " · ".join(parts)


def book_page(solution: nbformat.NotebookNode, stem: str, config: dict) -> str:
    """The exercise page: questions with the blank code, solutions in dropdowns."""
    cells = solution.cells
    title, _, intro = cells[0].source.partition("\n")
    intro = intro.replace("](../chapters/", "](../../chapters/").strip()
    out = [title, "", intro, "", _links(config, stem) + ".", ""]
    setup = next(c for c in cells if c.cell_type == "code")
    out += ["The notebook starts by loading its checker:", "", "```python", setup.source, "```", ""]
    pending: list[str] = []  # the current question's solution, shown when the question ends

    def flush() -> None:
        if pending:
            out.extend([":::{admonition} Solution", ":class: dropdown", "", *pending, ":::", ""])
            pending.clear()

    for cell in cells[1:]:
        if cell is setup:
            continue
        if cell.cell_type == "markdown" and not is_explanation(cell):
            flush()
            if cell.source.startswith("## Your score"):
                break
            out += [cell.source, ""]
        elif is_explanation(cell):
            pending += [cell.source, ""]
        elif is_solution_cell(cell):
            out += ["```python", blank_code(cell.source).rstrip(), "```", ""]
            pending += ["```python", solution_code(cell.source).rstrip(), "```", ""]
        elif CHECK.match(cell.source.strip()) and out[-2:] == ["```", ""]:
            out[-2:] = ["", cell.source.strip(), "```", ""]  # the check goes with the code it checks
    flush()
    out.append("At the end of the notebook, `check.summary()` lists your points for every question.")
    return "\n".join(out).rstrip() + "\n"


def index_table(stems: list[str], titles: dict[str, str]) -> str:
    from gpt2_course.grading.questions import get_exercise

    rows = ["| chapter | exercises | questions | points | notebook |", "|---|---|---|---|---|"]
    for stem in stems:
        ex = get_exercise(stem)
        chapter = stem.split("_")[0].lstrip("0")
        rows.append(f"| {chapter} | [{titles[stem]}]({stem}.md) | {len(ex.questions)} | {ex.max_points} | "
                    f"{{download}}`{stem}.ipynb <../../{BLANKS}/{stem}.ipynb>` |")
    return "\n".join(rows)


def consistency(solution: nbformat.NotebookNode, stem: str) -> list[str]:
    """Problems between a solution notebook and the grader's questions."""
    from gpt2_course.grading.questions import bank_module, exercise_ids, get_exercise

    where = f"{SOLUTIONS}/{stem}.ipynb"
    bank = f"gpt2_course/exercises/{bank_module(stem)}.py"
    if stem not in exercise_ids():
        return [f"{where}: there is no question bank {bank} for it."]
    ex = get_exercise(stem)
    problems = []
    text = "\n".join(c.source for c in solution.cells if c.cell_type == "markdown")
    headings = {f"q{m['n']}": int(m["points"]) for m in HEADING.finditer(text)}
    checks = [m["qid"] for c in solution.cells
              if c.cell_type == "code" and (m := CHECK.match(c.source.strip()))]
    wanted = [q.id for q in ex.questions]
    if checks != wanted:
        problems.append(f"{where}: check cells {checks}, but {bank} asks {wanted}.")
    for q in ex.questions:
        if headings.get(q.id) != q.points:
            problems.append(f"{where}: '## Question {q.id[1:]} ({q.points} point...)' heading expected "
                            f"({bank} gives {q.id} {q.points} points).")
        defined = any(is_solution_cell(c) and re.search(rf"^(def |class )?{q.name}\b", c.source, re.M)
                      for c in solution.cells)
        if not defined:
            problems.append(f"{where}: no solution cell defines `{q.name}` ({q.id}).")
    meta = solution.metadata.get("gpt2_course", {})
    if meta.get("exercise") != stem:
        problems.append(f"{where}: metadata gpt2_course.exercise should be {stem!r}.")
    return problems


def expected(root: Path = ROOT) -> tuple[dict[Path, str], list[str]]:
    """Every generated file and the text it should hold, plus consistency problems."""
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8")) or {}
    files: dict[Path, str] = {}
    problems: list[str] = []
    titles: dict[str, str] = {}
    stems = sorted(p.stem for p in (root / SOLUTIONS).glob("*.ipynb"))
    for stem in stems:
        solution = nbformat.read(root / SOLUTIONS / f"{stem}.ipynb", as_version=4)
        problems += consistency(solution, stem)
        titles[stem] = solution.cells[0].source.partition("\n")[0].removeprefix("# Exercises: ").strip()
        files[root / BLANKS / f"{stem}.ipynb"] = nbformat.writes(blank_notebook(solution, stem)) + "\n"
        files[root / PAGES / f"{stem}.md"] = book_page(solution, stem, config)
    index = root / INDEX
    text = index.read_text(encoding="utf-8") if index.exists() else ""
    if TABLE_BEGIN in text and TABLE_END in text:
        head, _, rest = text.partition(TABLE_BEGIN)
        table = index_table(stems, titles)
        files[index] = f"{head}{TABLE_BEGIN}\n{table}\n{rest[rest.index(TABLE_END):]}"
    else:
        problems.append(f"{INDEX} lacks the markers {TABLE_BEGIN} ... {TABLE_END}.")
    return files, problems


def orphans(root: Path, files: dict[Path, str]) -> list[Path]:
    found = list((root / BLANKS).glob("*.ipynb")) + list((root / PAGES).glob("*.md"))
    return sorted(p for p in found if p not in files and p.name != "index.md")


def check(root: Path = ROOT) -> list[str]:
    """What is stale, missing, orphaned or inconsistent; empty when all is in sync."""
    files, problems = expected(root)
    for path, text in files.items():
        rel = path.relative_to(root)
        if not path.exists():
            problems.append(f"{rel} is missing: run `make exercises`.")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"{rel} is stale: edit {SOLUTIONS}/ (never the generated file), "
                            "then run `make exercises`.")
    for stale in orphans(root, files):
        problems.append(f"{stale.relative_to(root)} has no solution notebook in {SOLUTIONS}/: "
                        "delete it or run `make exercises`.")
    return problems


def write(root: Path = ROOT) -> list[str]:
    """Regenerate every file; returns the consistency problems (the files are written anyway)."""
    files, problems = expected(root)
    for path, text in files.items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(root)}")
    for stale in orphans(root, files):
        stale.unlink()
        print(f"removed {stale.relative_to(root)}")
    return problems


def main() -> None:
    run_cli(__doc__, check, write, ROOT)


if __name__ == "__main__":
    main()
