"""The suite's one seeding convention.

Episode ``i`` of any run with base seed ``S`` (a demo, an evaluation, a dataset generation, a benchmark) resets
the env with ``env_seed`` and the policy or demonstrator with ``policy_seed``, where::

    (env_seed, policy_seed) = SeedSequence(S, spawn_key=(i,)).generate_state(2, uint32)

An episode is therefore determined by ``(S, i)`` alone, whatever the number of workers or the order in which
they finish, and two runs with different base seeds draw statistically independent episodes (``S + i`` would
make the runs with base seeds 0 and 1 share all but one episode).

Inside the env, one reset seed feeds separate random streams (see ``PickSortEnv.reset``): the episode layout,
the physics (belt fluctuation and the like) and the sensors each get their own generator, so consuming one
(rendering instead of perceiving objects, say) never shifts another.
"""

from __future__ import annotations

import numpy as np

#: The convention in words, recorded in dataset and result files.
SEEDING_CONVENTION = (
    "episode i of base seed S: (env_seed, policy_seed) = SeedSequence(S, spawn_key=(i,)).generate_state(2, uint32)"
)


def episode_seeds(seed: int, index: int) -> tuple[int, int]:
    """The ``(env_seed, policy_seed)`` of episode ``index`` of a run with base seed ``seed``.

    Raises:
        ValueError: a negative seed or index.
    """
    seed, index = int(seed), int(index)
    if seed < 0 or index < 0:
        raise ValueError(f"seed and episode index must be >= 0, got seed={seed}, index={index}")
    state = np.random.SeedSequence(seed, spawn_key=(index,)).generate_state(2, dtype=np.uint32)
    return int(state[0]), int(state[1])
