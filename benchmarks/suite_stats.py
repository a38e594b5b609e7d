"""The suite's aggregate statistics: the interquartile mean (IQM) and a stratified bootstrap.

Agarwal et al. 2021 ("Deep RL at the Edge of the Statistical Precipice") recommend, for a few
runs on a few games, the IQM of the normalized scores of all runs with a 95% confidence interval
from a stratified bootstrap. Their library, rliable 1.2.0, is not used, for two reasons:
- it requires arch, scipy, absl-py, seaborn and pandas (arch brings statsmodels), none of which
  this project otherwise needs, for the two functions below;
- it takes a (runs x games) matrix, one number of runs for every game, and the suite has 3 seeds
  of two games and 1 of the others.
What is computed is the same: the IQM is the mean of the middle half, with int(0.25 n) values cut
at each end (rliable calls scipy's trim_mean(x, 0.25)); the interval is the percentile bootstrap
(rliable's default method), 50,000 replicates, resampling the runs of each game among themselves.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

TRIM = 0.25
REPLICATES = 50_000
CONFIDENCE = 0.95


def iqm(values, axis: int = -1) -> np.ndarray | float:
    """The 25% trimmed mean along `axis`: sorted, int(0.25 n) values dropped at each end."""
    values = np.sort(np.asarray(values, dtype=np.float64), axis=axis)
    n = values.shape[axis]
    if n == 0:
        raise ValueError("the IQM of no values")
    cut = int(TRIM * n)
    middle = np.take(values, np.arange(cut, n - cut), axis=axis)
    result = middle.mean(axis=axis)
    return float(result) if np.ndim(result) == 0 else result


def stratified_bootstrap(strata: Sequence[Sequence[float]], statistic: Callable = iqm, replicates: int = REPLICATES,
                         confidence: float = CONFIDENCE, seed: int = 0) -> tuple[float, float]:
    """A percentile confidence interval of `statistic` over all values of all strata (here: the
    runs of each game). Each replicate draws, within every stratum, as many values as it holds,
    with replacement, so every game keeps its number of runs: a game with one run is in every
    replicate exactly once, where plain resampling would drop it from some and double it in others.

    `statistic` takes a (replicates, values) array and reduces its last axis. Fixed seed: the
    report is the same each time it is written.
    """
    strata = [np.asarray(stratum, dtype=np.float64) for stratum in strata]
    if not strata or any(len(stratum) == 0 for stratum in strata):
        raise ValueError("every stratum needs at least one value")
    rng = np.random.default_rng(seed)
    # One column block per stratum: indices into that stratum only.
    resampled = np.concatenate([stratum[rng.integers(0, len(stratum), size=(replicates, len(stratum)))] for stratum in strata], axis=1)
    estimates = np.asarray(statistic(resampled, axis=-1))
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(estimates, [tail, 100 - tail])
    return float(low), float(high)
