"""Every course lesson (course/lesson_*.py, jupytext percent format) executes end to end as a notebook in quick
mode (``R2S2R_COURSE_QUICK=1``), the way a student opens it: converted with jupytext, run by nbclient in an
ipykernel.  docs/course.md lists the measured time of each."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

COURSE = Path(__file__).resolve().parent.parent / "course"
LESSONS = sorted(COURSE.glob("lesson_*.py"))


def test_nine_lessons_in_order() -> None:
    numbers = [int(p.stem.split("_")[1]) for p in LESSONS]
    assert numbers == list(range(9)), [p.name for p in LESSONS]


# What a student may not touch: the lab's parameters (docs/concepts.md#honesty-rules) and the exercise labs' files.
FORBIDDEN_ATTRIBUTES = {"world_params", "_lab", "_world", "_model", "_data", "load_lab", "seal_lab"}
FORBIDDEN_STRINGS = ("course/labs", "sealed_lab", "configs/default.json")


@pytest.mark.parametrize(
    "path", [*LESSONS, COURSE / "helpers.py", *sorted((COURSE / "solutions").glob("*.py"))], ids=lambda p: p.name
)
def test_lessons_and_solutions_use_only_the_public_side(path: Path) -> None:
    import ast

    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRIBUTES:
            found.add(node.attr)
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_ATTRIBUTES:
            found.add(node.id)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("r2s2r_envs.lab"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("r2s2r_envs.lab"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.update(f for f in FORBIDDEN_STRINGS if f in node.value)
    assert not found, f"{path.name} reaches into the lab: {sorted(found)}"


def test_lessons_run_without_the_solutions() -> None:
    for path in [*LESSONS, COURSE / "helpers.py"]:
        assert "solutions" not in path.read_text(), f"{path.name} uses course/solutions, which a teacher may remove"


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_runs_as_notebook(lesson: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import jupytext  # the course extra, installed by `make`: never skipped
    from nbclient import NotebookClient

    monkeypatch.setenv("R2S2R_COURSE_QUICK", "1")
    monkeypatch.setenv("R2S2R_COURSE_OUT", str(tmp_path))
    monkeypatch.setenv("MUJOCO_GL", "egl")
    notebook = jupytext.read(lesson)
    assert notebook.cells, lesson
    client = NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(COURSE)}})
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError naming the cell and the error
    elapsed = time.perf_counter() - start
    print(f"{lesson.name}: {elapsed:.1f} s")
    errors = [
        o
        for c in notebook.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors
    # Every lesson draws at least one figure, inline in the notebook.
    images = [o for c in notebook.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert images, f"{lesson.name} drew no figure"
    assert any(tmp_path.iterdir()), "the lesson wrote nothing under R2S2R_COURSE_OUT"
