"""Exercise 6: the mixing rule for 40 real and 600 simulated demonstrations: M/N = 15 > 5, so real_fraction
between N/(N+M) = 40/640 = 0.0625 and sqrt(N/M) = sqrt(40/600) = 0.258."""

from _common import write_answer

from r2s2r_envs.datasets import suggest_real_fraction

rule = suggest_real_fraction(40, 600)
print(rule.note)
write_answer(6, {"real_fraction": [round(rule.low, 4), round(rule.high, 4)]})
