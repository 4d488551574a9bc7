"""The whole Real2Sim2Real chain on lab v3 at the ``cpu`` recipe, evaluated with protocol v2.

    python experiments/lab-v3-chain/chain.py --out /work/runs/lab-v3-chain          # runs or resumes
    r2s2r ablation --out /work/runs/lab-v3-chain --export-record experiments/lab-v3-chain

The full design on ``--lab v3`` (sysid at the full budget, the lab's 50 teleoperator demos, the behavior fit, 1,000
demos per variant from that grounding, every dataset recording ``object_visible``), trained with seeds 0-2 (the
issue's minimum), evaluated on the ``test`` split's standard mix (the tables read its nominal episodes), with the
``real_fraction`` sweep cut to what the issue's goals read: 0 (sim only), the rule's high end and 1 (real only).
Nothing is chosen on lab episodes: the design is fixed here before any of its policies ran.
"""

from __future__ import annotations

import argparse
import dataclasses

from r2s2r_envs.ablation.chain import resolve_lab
from r2s2r_envs.ablation.design import lab_design
from r2s2r_envs.ablation.runner import run_ablation


def design():
    return dataclasses.replace(
        lab_design(resolve_lab("v3"), "full"),
        name="lab-v3-chain",
        seeds=(0, 1, 2),
        sweep_seeds=(0, 1, 2),
        sweep_fractions=(0.0, "high", 1.0),
        eval_split="test",
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    summary = run_ablation(design(), args.out, workers=args.workers)
    print(summary.to_dict())
