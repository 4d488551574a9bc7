"""Shared by the solution scripts: the lessons' helpers (course/helpers.py) on the import path, and writing an
answer file."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # course/: helpers.py


def write_answer(lesson: int, answer: dict) -> Path:
    """Write ``answer_<lesson>.json`` in the current directory and print it."""
    path = Path(f"answer_{lesson}.json")
    path.write_text(json.dumps(answer, indent=2) + "\n")
    print(f"wrote {path}: {json.dumps(answer)}\ncheck with: r2s2r course check {lesson} {path}")
    return path
