#!/usr/bin/python3
"""Reference values for TOST and PageTrend (stats/equivalence_test.go).

Run with Debian's Python (python3-scipy 1.10.1):

    /usr/bin/python3 stats/testdata/gen_equivalence.py

TOST has no SciPy function: it is two one-sided one-sample t-tests,
scipy.stats.ttest_1samp(x, low, alternative="greater") and
scipy.stats.ttest_1samp(x, high, alternative="less"); P is the larger p-value.
PageTrend is scipy.stats.page_trend_test(data, method=...), method "exact"
without ties, "asymptotic" with them.
"""
import json
import scipy
from scipy import stats

tost = [
    ("inside", [-0.40, -0.41, -0.39], -0.56, -0.26),
    ("22 % drop against 33 +- 10", [-0.248, -0.25, -0.245], -0.565, -0.265),
    ("wide", [-0.4, -0.2, -0.6, -0.3], -0.565, -0.265),
    ("n=6", [0.1, 0.12, 0.08, 0.11, 0.09, 0.1], 0.0, 0.2),
]
out = {"scipy_version": scipy.__version__, "tost": [], "page": []}
for name, x, lo, hi in tost:
    pl = stats.ttest_1samp(x, lo, alternative="greater").pvalue
    ph = stats.ttest_1samp(x, hi, alternative="less").pvalue
    out["tost"].append({"name": name, "x": x, "low": lo, "high": hi, "p_low": float(pl), "p_high": float(ph)})

page = [
    ("perfect, 2 blocks of 7", [[1, 2, 3, 4, 5, 6, 7], [1.1, 2.1, 3.1, 4.1, 5.1, 6.1, 7.1]], "exact"),
    ("one swap, 3 blocks of 7", [[1, 2, 4, 3, 5, 6, 7], [1, 2, 3, 4, 5, 6, 7], [2, 1, 3, 4, 5, 7, 6]], "exact"),
    ("no trend, 3 blocks of 4", [[3, 1, 4, 2], [2, 4, 1, 3], [4, 3, 2, 1]], "exact"),
    ("ties, 3 blocks of 5", [[1, 1, 2, 3, 4], [1, 2, 2, 3, 5], [2, 1, 3, 3, 4]], "asymptotic"),
    ("9 treatments, 2 blocks", [[1, 3, 2, 4, 5, 6, 8, 7, 9], [2, 1, 3, 4, 6, 5, 7, 9, 8]], "asymptotic"),
]
for name, d, m in page:
    r = stats.page_trend_test(d, method=m)
    out["page"].append({"name": name, "data": d, "method": m, "l": float(r.statistic), "p": float(r.pvalue)})
with open(__file__.replace("gen_equivalence.py", "equivalence.json"), "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
