"""Does a simulator rank policies the way the lab does?  Pearson correlation and mean maximum rank violation.

Both compare two lists of the same policies' success rates, one measured in a simulated variant and one in the
lab (docs/leaderboard.md#sim-vs-lab-ranking, docs/concepts.md#validation).  They follow the definitions of the
SIMPLER benchmark (Li et al., "Evaluating Real-World Robot Manipulation Policies in Simulation", 2024):

- Pearson: the usual correlation of the centred lists; 1 when the centred lists are identical.  Undefined
  (None here) when one list is constant and the other is not: there is no ranking to agree with.
- MMRV(sim, real) = (1/N) sum_i max_j 1[(s_i > s_j) != (r_i > r_j)] |r_i - r_j|: for each policy, the worst
  lab-success gap over the pairs the simulator orders differently from the lab (strict ``>``: a pair tied in
  one list and ordered in the other counts).  0 is a perfect ranking; it is asymmetric, the magnitudes come
  from the lab (``real``) list.  Example: sim = [0.8, 0.5, 0.6], real = [0.9, 0.45, 0.3] gives 0.100.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _check_pair(sim: Sequence[float], real: Sequence[float]) -> tuple[list[float], list[float]]:
    s, r = [float(v) for v in sim], [float(v) for v in real]
    if len(s) != len(r):
        raise ValueError(f"sim and real must list the same policies: got {len(s)} and {len(r)} values")
    if not all(math.isfinite(v) for v in s + r):
        raise ValueError(f"success rates must be finite, got sim={s}, real={r}")
    return s, r


def pearson(sim: Sequence[float], real: Sequence[float]) -> float | None:
    """Pearson correlation of two equally long lists.

    Returns:
        The correlation in [-1, 1]; 1.0 when the centred lists are identical (constant lists included); None
        when only one list is constant or there are fewer than two values.

    Raises:
        ValueError: lists of different lengths or non-finite values.
    """
    s, r = _check_pair(sim, real)
    n = len(s)
    if n < 2:
        return None
    ms, mr = sum(s) / n, sum(r) / n
    cs, cr = [v - ms for v in s], [v - mr for v in r]
    if all(math.isclose(a, b, abs_tol=1e-12) for a, b in zip(cs, cr)):
        return 1.0
    ss, rr = sum(v * v for v in cs), sum(v * v for v in cr)
    if ss == 0.0 or rr == 0.0:
        return None
    return max(-1.0, min(1.0, sum(a * b for a, b in zip(cs, cr)) / math.sqrt(ss * rr)))


def mmrv(sim: Sequence[float], real: Sequence[float]) -> float:
    """Mean maximum rank violation MMRV(sim, real), in the lab's units (success-rate points as fractions).

    Args:
        sim: Success rates of N policies in the simulator.
        real: Success rates of the same N policies in the lab, in the same order.

    Returns:
        ``(1/N) sum_i max_j 1[(s_i > s_j) != (r_i > r_j)] |r_i - r_j|``; 0 for an empty list.

    Raises:
        ValueError: lists of different lengths or non-finite values.
    """
    s, r = _check_pair(sim, real)
    n = len(s)
    if n == 0:
        return 0.0
    total = 0.0
    for i in range(n):
        total += max(
            (abs(r[i] - r[j]) for j in range(n) if (s[i] > s[j]) != (r[i] > r[j])),
            default=0.0,
        )
    return total / n


__all__ = ["mmrv", "pearson"]
