"""What a simulated world's demonstrator sees of the objects.

The observations of a world that models camera-based perception (``WorldParams.perceives``: the estimator's delay,
objects the hand hides, dropouts, rare category confusion) are the estimator's.  A simulator's data generators do not
wait for them: like a scripted expert or a MimicGen-style generator in any simulator, the suite's simulated
demonstrators (the scripted planner, the human-like generator) act on the objects' true state, which the env gives
them (``PickSortEnv.simulator_objects``), while the observations an env reports and a dataset records stay the
estimator's, so a policy learns to act on what the cameras give.  The lab gives none (its teleoperator watches the
estimator's output like a person at a monitor, ``lab.teleop``); worlds without an estimator are unaffected.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def demonstrator_view(env: Any, obs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], bool]:
    """``obs`` with the object keys the env's simulator knows where it gives them (``env`` is the unwrapped env; an
    env without ``simulator_objects`` gives none), and whether it did."""
    objects = getattr(env, "simulator_objects", lambda: None)()
    return (obs, False) if objects is None else ({**obs, **objects}, True)
