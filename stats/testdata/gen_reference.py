#!/usr/bin/python3
"""Generate reference.json for the Go tests of package stats.

Run with Debian's Python, which has python3-scipy and python3-numpy:

    /usr/bin/python3 stats/testdata/gen_reference.py

It writes reference.json next to this script. Every case stores its inputs,
so the Go tests never need to reproduce the random draws. The SciPy and NumPy
versions are recorded in the JSON.

Each test case records the result of the SciPy default call (two-sided,
method="auto") and which p-value method SciPy chose ("exact" or
"asymptotic"), found by comparing with explicit method= calls. One deliberate
exception, documented on stats.WilcoxonSignedRank: for Wilcoxon cases with
tied |d| but no zero differences and n <= 50, SciPy 1.10's "auto" applies the
exact distribution to a truncated statistic; the reference then stores the
method="approx" result (what the Go code does) and keeps SciPy's "auto"
p-value in "scipy_auto_pvalue" for information.
"""

import json
import math
import os
import warnings

import numpy as np
import scipy
from scipy import stats

warnings.simplefilter("ignore")  # small-sample warnings from scipy

rng = np.random.RandomState(20240601)


def r(a, nd=None):
    """List of Python floats, optionally rounded (rounding creates ties)."""
    a = np.asarray(a, dtype=float)
    if nd is not None:
        a = np.round(a, nd)
    return [float(v) for v in a]


def same(a, b):
    return a == b or (math.isnan(a) and math.isnan(b))


# ---------------------------------------------------------------- Summaries

def summary_case(name, xs):
    a = np.asarray(xs, dtype=float)
    n = len(a)
    c = {
        "name": name,
        "x": r(a),
        "n": n,
        "mean": float(np.mean(a)),
        "stdev": float(np.std(a, ddof=1)) if n >= 2 else 0.0,
        "min": float(np.min(a)),
        "median": float(np.median(a)),
        "p99": float(np.percentile(a, 99)),
        "max": float(np.max(a)),
    }
    if n >= 2:
        sem = np.std(a, ddof=1) / math.sqrt(n)
        if sem > 0:
            lo, hi = stats.t.interval(0.95, n - 1, loc=np.mean(a), scale=sem)
        else:  # t.interval rejects scale 0; the interval is the point
            lo = hi = np.mean(a)
        c["ci95_low"] = float(lo)
        c["ci95_high"] = float(hi)
        c["ci95_half"] = float(stats.t.ppf(0.975, n - 1) * sem)
    return c


summaries = [
    summary_case("small five", [2.0, 4.0, 4.0, 5.0, 7.0]),
    summary_case("single value", [3.25]),
    summary_case("two values", [1.0, 2.0]),
    summary_case("even count", [10.0, 1.0, 7.0, 3.0]),
    summary_case("throughput gbps n=10", r(rng.normal(29.5, 0.4, 10), 3)),
    summary_case("latency us n=100 skewed", r(rng.lognormal(3.0, 0.5, 100), 2)),
    summary_case("constant", [5.0] * 8),
    summary_case("negative and positive", r(rng.normal(0, 10, 37))),
    summary_case("n=1000", r(rng.exponential(2.0, 1000))),
    summary_case("n=101 p99 on a knot", list(map(float, range(101)))),
]

tcrit = [
    {"dof": d, "t": float(stats.t.ppf(0.975, d))}
    for d in [1, 2, 3, 4, 5, 9, 10, 29, 30, 99, 100, 1000, 100000]
]

# --------------------------------------------------------- Mann-Whitney U


def mwu_case(name, x, y):
    # scipy 1.10 _mwu_choose_method: asymptotic if both samples have more
    # than 8 values or the pooled sample has ties, else exact. The rule is
    # replicated here and checked against the "auto" result.
    res = stats.mannwhitneyu(x, y)
    pooled = np.concatenate([x, y])
    ties = len(np.unique(pooled)) != len(pooled)
    method = "asymptotic" if (len(x) > 8 and len(y) > 8) or ties else "exact"
    check = stats.mannwhitneyu(x, y, method=method)
    if not same(res.pvalue, check.pvalue):
        raise SystemExit(f"mwu {name}: scipy's auto method is not {method}")
    return {
        "name": name,
        "x": r(x),
        "y": r(y),
        "statistic": float(res.statistic),
        "pvalue": float(res.pvalue),
        "method": method,
        "scipy_call": "mannwhitneyu(x, y)",
    }


base = rng.normal(10, 1, 200)
mwu = [
    mwu_case("5 vs 5 positive shift", r(rng.normal(12, 1, 5)), r(rng.normal(10, 1, 5))),
    mwu_case("3 vs 7 negative shift", r(rng.normal(8, 1, 3)), r(rng.normal(10, 1, 7))),
    mwu_case("8 vs 20 exact by small side", r(rng.normal(10.5, 1, 8)), r(rng.normal(10, 1, 20))),
    mwu_case("9 vs 9 asymptotic", r(rng.normal(10.8, 1, 9)), r(rng.normal(10, 1, 9))),
    mwu_case("5 vs 6 with ties", [1.0, 2.0, 2.0, 3.0, 5.0], [2.0, 3.0, 4.0, 4.0, 6.0, 7.0]),
    mwu_case("50 vs 60 continuous", r(rng.normal(10.2, 1, 50)), r(rng.normal(10, 1, 60))),
    mwu_case("40 vs 45 integer ties", r(rng.poisson(5, 40)), r(rng.poisson(6, 45))),
    mwu_case("all identical", [4.0] * 6, [4.0] * 7),
    mwu_case("6 vs 6 complete separation", [1.0, 2, 3, 4, 5, 6], [7.0, 8, 9, 10, 11, 12]),
    mwu_case("1 vs 1", [1.0], [2.0]),
    mwu_case("4 vs 100 exact", r(rng.normal(11, 1, 4)), r(rng.normal(10, 1, 100))),
    mwu_case("U at center", [1.0, 4.0], [2.0, 3.0]),
    mwu_case("8 vs 500 exact large", r(rng.normal(10.3, 1, 8)), r(base[:100].tolist() + rng.normal(10, 1, 400).tolist())),
    mwu_case("30 vs 30 separation asymptotic", r(np.arange(30) + 100.0), r(np.arange(30) * 1.0)),
    mwu_case("7 vs 7 overlap", [1.1, 2.2, 3.3, 4.4, 5.5, 6.6, 7.7], [1.5, 2.5, 3.5, 4.5, 5.9, 8.1, 9.0]),
]

# ------------------------------------------------------ Wilcoxon signed-rank


def wil_case(name, x, y):
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    d = x - y
    nz = d[d != 0]
    has_zero = bool(np.any(d == 0))
    has_ties = len(np.unique(np.abs(nz))) != len(nz)
    res = stats.wilcoxon(x, y)
    note = None
    if has_ties and not has_zero and len(d) <= 50:
        auto = res
        res = stats.wilcoxon(x, y, method="approx")
        method = "asymptotic"
        note = float(auto.pvalue)
    else:
        # scipy 1.10 "auto": exact if n <= 50, but approx if there are zeros.
        method = "exact" if len(d) <= 50 and not has_zero else "asymptotic"
        check = stats.wilcoxon(x, y, method="exact" if method == "exact" else "approx")
        if not same(res.pvalue, check.pvalue):
            raise SystemExit(f"wilcoxon {name}: scipy's auto method is not {method}")
    c = {
        "name": name,
        "x": r(x),
        "y": r(y),
        "statistic": float(res.statistic),
        "pvalue": float(res.pvalue),
        "method": method,
        "scipy_call": "wilcoxon(x, y)" if note is None else "wilcoxon(x, y, method='approx')",
    }
    if note is not None:
        c["scipy_auto_pvalue"] = note
    return c


corn = [6, 8, 14, 16, 23, 24, 28, 29, 41, -48, 49, 56, 60, -67, 75]
wil = [
    wil_case("n=10 positive shift", r(rng.normal(10.5, 1, 10)), r(rng.normal(10, 1, 10))),
    wil_case("n=6 negative shift", r(rng.normal(9, 1, 6)), r(rng.normal(10, 1, 6))),
    wil_case("corn heights (scipy docs)", [float(v) for v in corn], [0.0] * len(corn)),
    wil_case("n=50 exact", r(rng.normal(10.2, 1, 50)), r(rng.normal(10, 1, 50))),
    wil_case("n=51 asymptotic", r(rng.normal(10.2, 1, 51)), r(rng.normal(10, 1, 51))),
    wil_case("n=12 with zeros", [1.0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
             [1.0, 2, 2.5, 5, 4.2, 6, 9, 7.1, 8, 13.5, 10.25, 12]),
    wil_case("n=20 ties no zeros", r(rng.normal(10.3, 1, 20), 1), r(np.full(20, 10.05))),
    wil_case("n=30 ties and zeros", r(rng.poisson(6, 30)), r(rng.poisson(5, 30))),
    wil_case("n=8 all equal positive differences", [float(v) for v in range(11, 19)], [float(v) for v in range(1, 9)]),
    wil_case("n=9 all positive", [float(v * v) for v in range(1, 10)], [0.5] * 9),
    wil_case("n=200 continuous", r(rng.normal(0.1, 1, 200)), r(np.zeros(200))),
    wil_case("n=1", [3.0], [1.0]),
    wil_case("symmetric center", [1.0, -2.0, 3.0, -4.0, 5.0, -6.0, -7.0, 8.0], [0.0] * 8),
    wil_case("n=25 negative exact", r(rng.normal(9.0, 1.5, 25)), r(rng.normal(10, 1.5, 25))),
    wil_case("n=60 ties no zeros", r(rng.normal(0.2, 1, 60), 1), r(np.full(60, 0.05))),
]

# ----------------------------------------------------------- Kendall tau-b


def ken_case(name, x, y):
    # scipy 1.10 "auto": exact if neither sample has ties and either
    # n <= 33 or min(dis, tot - dis) <= 1, else asymptotic.
    res = stats.kendalltau(x, y)
    xa, ya = np.asarray(x), np.asarray(y)
    n = len(xa)
    ties = len(np.unique(xa)) != n or len(np.unique(ya)) != n
    dis = sum(1 for i in range(n) for j in range(i + 1, n)
              if (xa[i] - xa[j]) * (ya[i] - ya[j]) < 0)
    tot = n * (n - 1) // 2
    exact = not ties and (n <= 33 or min(dis, tot - dis) <= 1)
    method = "exact" if exact else "asymptotic"
    check = stats.kendalltau(x, y, method=method)
    if not same(res.pvalue, check.pvalue):
        raise SystemExit(f"kendall {name}: scipy's auto method is not {method}")
    return {
        "name": name,
        "x": r(x),
        "y": r(y),
        "statistic": float(res.statistic),
        "pvalue": float(res.pvalue),
        "method": method,
        "scipy_call": "kendalltau(x, y)",
    }


def swap_one(n):
    y = list(range(n))
    y[10], y[11] = y[11], y[10]
    return [float(v) for v in y]


u = rng.normal(0, 1, 300)
ken = [
    ken_case("n=10 random", r(rng.normal(0, 1, 10)), r(rng.normal(0, 1, 10))),
    ken_case("n=8 perfectly correlated", [float(v) for v in range(8)], [float(2 * v + 1) for v in range(8)]),
    ken_case("n=8 reversed", [float(v) for v in range(8)], [float(-v) for v in range(8)]),
    ken_case("n=33 exact", r(u[:33]), r(u[:33] + rng.normal(0, 2, 33))),
    ken_case("n=34 asymptotic", r(u[:34]), r(u[:34] + rng.normal(0, 2, 34))),
    ken_case("n=50 perfectly correlated", [float(v) for v in range(50)], [float(v) ** 2 for v in range(50)]),
    ken_case("n=40 one swap", [float(v) for v in range(40)], swap_one(40)),
    ken_case("n=20 ties in x", r(rng.normal(0, 1, 20), 0), r(rng.normal(0, 1, 20))),
    ken_case("n=30 ties in both", r(rng.randint(1, 6, 30)), r(rng.randint(1, 6, 30))),
    ken_case("n=200 continuous", r(u[:200]), r(0.1 * u[:200] + rng.normal(0, 1, 200))),
    ken_case("n=3", [1.0, 3.0, 2.0], [1.0, 2.0, 3.0]),
    ken_case("n=2", [1.0, 2.0], [2.0, 1.0]),
    ken_case("n=100 weak with ties", r(u[:100], 1), r(-0.2 * u[:100] + rng.normal(0, 1, 100), 1)),
    ken_case("n=4 tau zero", [1.0, 2, 3, 4], [1.0, 4, 3, 2]),
]

out = {
    "generator": "stats/testdata/gen_reference.py",
    "scipy_version": scipy.__version__,
    "numpy_version": np.__version__,
    "summaries": summaries,
    "t_critical_95": tcrit,
    "mannwhitneyu": mwu,
    "wilcoxon": wil,
    "kendalltau": ken,
}

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference.json")
with open(path, "w") as f:
    json.dump(out, f, indent=1, allow_nan=False)
    f.write("\n")
print(f"wrote {path} (scipy {scipy.__version__}, numpy {np.__version__})")
