"""Another lab, another operator: the generator fitted to its demos moves like it, not like the default operator.

A course does the same with three commands (docs/behavior.md#another-operator): collect demos in its lab, fit,
generate in simulation and compare. The lab here differs from the default only in its operator (slower, tracking
the object along the belt before descending, a pinch grasp); the operator keys are the lab config's documented
``operator`` section (docs/lab.md).
"""

from __future__ import annotations

import pytest

from r2s2r_envs.behavior.fit import fit_behavior, save_model
from r2s2r_envs.behavior.metrics import compare
from r2s2r_envs.behavior.segments import load_demos
from r2s2r_envs.datasets.generate import generate

OTHER_OPERATOR = {"name": "slow-follow-pinch", "operator": {"speed": 0.6, "approach": "follow", "grasp": "pinch"}}
DEMOS = 10
# One object per episode keeps the test short (a grasp per demo) and within reach of a slow operator.
ONE = {"num_objects": 1}


@pytest.mark.slow
def test_generated_motion_follows_the_operator_it_was_fitted_to(tmp_path):
    other, default, model, generated = (tmp_path / n for n in ("other.hdf5", "default.hdf5", "m.json", "gen.hdf5"))
    common = {"episodes": DEMOS, "successes_only": True, "progress": False}
    generate("PickSort-Real-v0", out=other, env_kwargs={"lab": OTHER_OPERATOR, **ONE}, seed=1, **common)
    generate("PickSort-Real-v0", out=default, env_kwargs=ONE, seed=1, **common)
    save_model(fit_behavior(other), model)
    generate(
        "PickSort-BehaviorGrounded-v0",
        out=generated,
        env_kwargs={"behavior": str(model), **ONE},
        seed=2,
        episodes=DEMOS,
        progress=False,
    )
    sets = {name: load_demos(p) for name, p in (("other", other), ("default", default), ("gen", generated))}
    to_other, to_default = compare(sets["gen"], sets["other"]), compare(sets["gen"], sets["default"])
    # The two operators themselves are told apart, and the generator is nearer its own operator by the classifier.
    assert compare(sets["other"], sets["default"]).auc > 0.9
    assert to_other.auc < to_default.auc
    # Trait by trait: the generated means lie nearer the fitted operator's than the default operator's.
    near = 0
    traits = ("reach_duration", "follow_speed", "closure_spread", "thumb_lead", "arrival_to_grasp", "peak_speed")
    for name in traits:
        g = next(t for t in to_other.traits if t.trait == name)
        d = next(t for t in to_default.traits if t.trait == name)
        near += abs(g.mean_a - g.mean_b) < abs(d.mean_a - d.mean_b)
    assert near >= len(traits) - 1, f"only {near} of {len(traits)} traits nearer the fitted operator"
    assert to_other.dtw["distance"] < to_default.dtw["distance"]
