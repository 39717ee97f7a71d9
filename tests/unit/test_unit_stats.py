"""Statistics at their edges (``analysis.stats``): the order-statistic interval's rank rule.

Bug class (issue 16 §7): an interval at the wrong level: the median interval takes the tightest ranks whose
coverage is *at least* the level, so a rank whose coverage equals the level exactly qualifies.
"""
from __future__ import annotations

import pytest
from scipy import stats as sps

from analysis.stats import median_ci


@pytest.mark.planted("analysis.stats:median_ci",
                     'if coverage >= level:',
                     'if coverage > level:')
@pytest.mark.parametrize("n,level,ranks", [
    (4, 6 / 16, (2, 3)),      # rank 2 covers exactly 6/16 = the level: it qualifies (x(2), x(3))
    (8, 238 / 256, (2, 7)),   # rank 2 covers exactly 238/256
])
def test_median_ci_rank_whose_coverage_equals_the_level_qualifies(n, level, ranks):
    """Bug class: an interval at the wrong level: coverage compared with > instead of >= (a wider interval than
    the level asks for)."""
    j = ranks[0]
    assert sps.binom.cdf(n - j, n, 0.5) - sps.binom.cdf(j - 1, n, 0.5) == pytest.approx(level, abs=1e-6)
    x = [float(v) for v in range(n, 0, -1)]  # n..1, unsorted
    med, lo, hi = median_ci(x, level=level)
    assert (lo, hi) == (float(ranks[0]), float(ranks[1])) and med == (n + 1) / 2
    assert median_ci(x, level=level + 1e-9)[1:] == (1.0, float(n))  # just above it: the next wider ranks


@pytest.mark.planted("analysis.stats:median_ci",
                     'x = np.sort(np.asarray(samples, dtype=float))',
                     'x = np.sort(np.asarray(samples)).astype(float)')
def test_median_ci_reads_samples_as_numbers():
    """Bug class: an interval over the wrong values: samples read from text (a CSV column of strings) are taken as
    numbers, not sorted as strings ("10" before "9")."""
    assert median_ci(["10", "9", "8"]) == (9.0, 8.0, 10.0)
    assert median_ci([3, 1, 2]) == (2.0, 1.0, 3.0)
