"""Why version-2 drawn lab 4 stays low: the teleoperator in ``draw2:4`` with one drawn setting at a time put back
to lab v3's (finger servo, object masses, grasp), 20 episodes each on the ``dev`` split's nominal seeds.  Writes
``lab4-diagnosis.json`` beside this script.  (The record was made at commit b81d774, when version 2's belt reached
0.085 m/s and lab 4's ran 0.0772; a run now draws lab 4 with the narrowed belt, 0.0742.)

Example::

    MUJOCO_GL=egl nice python experiments/drawn-labs-v2/lab4_diagnosis.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from drawn_labs_v2 import run  # noqa: E402

from r2s2r_envs.lab.config import load_lab  # noqa: E402
from r2s2r_envs.lab.draw import draw_lab  # noqa: E402


def main() -> None:
    v3 = load_lab("v3").to_dict()
    results = []
    for what in ("fingers", "masses", "grasp"):
        config = draw_lab(4, version=2)
        config["name"] = f"drawn2-4-v3-{what}"
        if what == "fingers":
            for k in ("finger_kp", "finger_kv", "finger_force_limit"):
                config["world"][k] = v3["world"][k]
        elif what == "masses":
            config["world"]["object_mass"] = v3["world"]["object_mass"]
            config["effects"]["object_mass_variation"] = v3["effects"]["object_mass_variation"]
        else:
            config["operator"]["grasp"] = v3["operator"]["grasp"]
        r = run(config, 20)
        print(f"{r['lab']:24s} {r['successes']:3d}/20  {r['first_failure']}", flush=True)
        results.append(r)
    (HERE / "lab4-diagnosis.json").write_text(
        json.dumps({"script": "experiments/drawn-labs-v2/lab4_diagnosis.py", "results": results}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()
