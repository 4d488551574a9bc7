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
