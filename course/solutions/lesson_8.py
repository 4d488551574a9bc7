"""Exercise 8: how well the nominal simulator ranks the four planner settings against course-ranking, with the
exercise's own seeds, episodes and objects (r2s2r course labs --json states them)."""

from _common import write_answer

import r2s2r_envs  # noqa: F401
from r2s2r_envs.behavior import make_demonstrator
from r2s2r_envs.course.exercises import CHECK_BASE_SEED, RANKING_EPISODES, RANKING_OBJECTS, RANKING_POLICIES
from r2s2r_envs.evaluation import evaluate
from r2s2r_envs.evaluation.ranking import mmrv, pearson


def success(env_id: str, settings: dict, **kwargs) -> float:
    result = evaluate(
        env_id,
        lambda env: make_demonstrator(env, "scripted", **settings),
        episodes=RANKING_EPISODES,
        base_seed=CHECK_BASE_SEED,
        env_kwargs={"num_objects": RANKING_OBJECTS, **kwargs},
        progress=False,
    )
    return result.summary["success_rate"]


sim = [success("PickSort-Ungrounded-v0", dict(s)) for s in RANKING_POLICIES]
lab = [success("PickSort-Real-v0", dict(s), lab="course-ranking") for s in RANKING_POLICIES]
print("sim:", sim, "\nlab:", lab)
p = pearson(sim, lab)
write_answer(8, {"pearson": None if p is None else round(p, 4), "mmrv": round(mmrv(sim, lab), 4)})
