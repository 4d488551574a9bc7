"""Exercise 7: the style of course-operator's teleoperator, read from its demonstrations' traits against the
default lab's operator (approach above, grasp wrap, release drop: docs/lab.md, "Operator").

* approach: a "follow" operator comes in along the belt behind the object, so its hand travels with the belt
  in the last second before closing (`follow_speed`, the TCP velocity in the belt's direction of travel, near
  the belt speed, about 0.1 m/s; its approach is less vertical: `approach_z` well above -1); "above" descends
  from above where the object will be (`follow_speed` near 0, `approach_z` near -1).
* grasp: "wrap" closes the digits in turn (`closure_spread` about 0.1-0.25 s), "pinch" all together (near 0).
* release: "drop" opens the hand 0.22 m up (`release_height`), "place" lowers the object first (well below).
"""

import json
import subprocess
import sys
from pathlib import Path

from _common import write_answer

from r2s2r_envs.behavior.metrics import compare

ONE = json.dumps({"num_objects": 1})


def demos(out: str, lab: str) -> str:
    cmd = ["generate", "PickSort-Real-v0", "--lab", lab, "--env-kwargs", ONE, "--episodes", "15", "--successes-only"]
    if not Path(out).exists():
        subprocess.run([sys.executable, "-m", "r2s2r_envs.cli", *cmd, "--out", out, "--workers", "2"], check=True)
    return out


comparison = compare(demos("default_operator.hdf5", "default"), demos("course_operator.hdf5", "course-operator"))
print(comparison.table())
traits = {t.trait: t for t in comparison.traits}
other = {name: traits[name].mean_b for name in ("follow_speed", "approach_z", "closure_spread", "release_height")}
print("course-operator:", other)
answer = {
    "approach": "follow" if other["follow_speed"] > 0.04 else "above",
    "grasp": "pinch" if other["closure_spread"] < 0.05 else "wrap",
    "release": "place" if other["release_height"] < 0.18 else "drop",
}
write_answer(7, answer)
