"""Statistics, in one pure module: confidence intervals for shares and for latencies.

- :func:`binomial_ci` — exact (Clopper–Pearson) interval of a share k/n, used
  for false-allow rates (ATR paper §5, dependency omission).
- :func:`expectation_interval` — where a share drawn at rate p from n trials
  lands, used to check that the omission false-allow rate tracks p.
- :func:`median_ci` — the median of a sample with a distribution-free
  interval from order statistics, used for latency points (ATR paper
  Figure 2: "95% confidence intervals over seven repetitions").
"""
from __future__ import annotations

import numpy as np
from scipy import stats


def binomial_ci(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact two-sided interval for the proportion k/n."""
    if n <= 0:
        return (float("nan"), float("nan"))
    ci = stats.binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="exact")
    return float(ci.low), float(ci.high)


def expectation_interval(n: int, p: float, level: float = 0.95) -> tuple[float, float]:
    """Central ``level`` interval of Binomial(n, p) / n: where an unbiased rate-p sample lands."""
    tail = (1 - level) / 2
    return float(stats.binom.ppf(tail, n, p)) / n, float(stats.binom.ppf(1 - tail, n, p)) / n


def median_ci(samples, level: float = 0.95) -> tuple[float, float, float]:
    """(median, low, high): the interval between order statistics x(j) and x(n-j+1).

    j is the largest rank whose interval still covers the median with at least
    ``level`` probability (binomial(n, 1/2)); with n = 7 this is (min, max),
    coverage 98.4%.  With fewer than 6 samples no such interval exists and
    (min, max) is returned.
    """
    x = np.sort(np.asarray(samples, dtype=float))
    n = len(x)
    if n == 0:
        return (float("nan"),) * 3
    j = 0
    for cand in range(1, n // 2 + 1):
        coverage = stats.binom.cdf(n - cand, n, 0.5) - stats.binom.cdf(cand - 1, n, 0.5)
        if coverage >= level:
            j = cand
    lo, hi = (x[j - 1], x[n - j]) if j else (x[0], x[-1])
    return float(np.median(x)), float(lo), float(hi)
