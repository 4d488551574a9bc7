"""Exercise 5: a world for course-world: identify it with `r2s2r sysid` (quick budget; a few minutes on two
cores) and answer with the identified world."""

import subprocess
import sys

from _common import write_answer

from r2s2r_envs.grounding.result import load_grounding

OUT = "course_world_grounding.json"
subprocess.run(
    [
        sys.executable,
        "-m",
        "r2s2r_envs.cli",
        "sysid",
        "--lab",
        "course-world",
        "--quick",
        "--workers",
        "2",
        "--out",
        OUT,
    ],
    check=True,
)
world = load_grounding(OUT).world.to_dict()
write_answer(5, {"world": world})
