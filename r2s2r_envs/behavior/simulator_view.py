"""What a simulated world's demonstrator sees of the objects.

The observations of a world that models camera-based perception (``WorldParams.perceives``: the estimator's delay,
objects the hand hides, dropouts, rare category confusion) are the estimator's.  A simulator's data generators do not
wait for them: like a scripted expert or a MimicGen-style generator in any simulator, the suite's simulated
demonstrators (the scripted planner, the human-like generator) read the objects' true state from the simulator, while
the observations an env reports and a dataset records stay the estimator's, so a policy learns to act on what the
cameras give.  The lab (``domain == "real"``) is never read beyond its observations: its teleoperator watches the
estimator's output like a person at a monitor (``lab.teleop``).  Worlds without an estimator are unaffected.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from r2s2r_envs.world import constants as C


def reads_simulator(env: Any) -> bool:
    """Whether a demonstrator in ``env`` (its ``unwrapped``) reads the objects' true state: a simulated world that
    models perception.  Read every step: ``set_world`` may change the world between episodes."""
    return getattr(env, "domain", "sim") == "sim" and bool(env.world_params.perceives)


def simulator_view(env: Any, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``obs`` with the object keys as the simulator knows them (true pose, velocity and category), float32 and
    flat like the observation's."""
    scene, data, f32 = env.scene, env.data, np.float32
    one_hot = np.zeros((scene.num_objects, len(C.CATEGORIES)), dtype=f32)
    one_hot[np.arange(scene.num_objects), [C.CATEGORIES.index(c) for c in env.object_categories]] = 1.0
    return {
        **obs,
        "object_pos": scene.object_pos(data).astype(f32).ravel(),
        "object_quat": scene.object_quat(data).astype(f32).ravel(),
        "object_vel": scene.object_vel(data).astype(f32).ravel(),
        "object_category": one_hot.ravel(),
    }
