"""Checks `avdit calibrate step-cache --json` against numpy: for each indicator, numpy.polyfit's
degree-4 fit of the same pairs predicts the same values, the in-sample R² and Pearson r agree, and
the leave-one-out R² equals numpy refits without each point. Usage: step_cache_check.py FILE.json"""
import json
import sys

import numpy as np

j = json.load(open(sys.argv[1]))
for name in ("modulated", "first_block"):
    f = j[name]
    x = np.array(f["indicator"], dtype=np.float64)
    y = np.array(f["residual_change"], dtype=np.float64)
    assert len(x) == len(y) == f["pairs"] >= 6, (name, len(x), f["pairs"])
    ours = np.array(f["coefficients"], dtype=np.float64)
    ref = np.polyfit(x, y, 4)
    scale = max(np.std(y), 1e-300)
    gap = np.max(np.abs(np.polyval(ours, x) - np.polyval(ref, x))) / scale
    assert gap < 1e-7, (name, "fitted values differ from numpy.polyfit's by", gap, "of std(y)")
    ss_tot = np.sum((y - y.mean()) ** 2)
    r2 = 1 - np.sum((y - np.polyval(ref, x)) ** 2) / ss_tot
    assert abs(r2 - f["r2"]) < 1e-9, (name, r2, f["r2"])
    press = sum((y[i] - np.polyval(np.polyfit(np.delete(x, i), np.delete(y, i), 4), x[i])) ** 2
                for i in range(len(x)))
    loo = 1 - press / ss_tot
    assert abs(loo - f["loo_r2"]) < 1e-6 * max(1, abs(loo)), (name, loo, f["loo_r2"])
    r = np.corrcoef(x, y)[0, 1]
    assert abs(r - f["pearson_r"]) < 1e-12, (name, r, f["pearson_r"])
    print(f"ok   {name}: numpy polyfit gap {gap:.1e} of std, R² {r2:.4f}, LOO R² {loo:.4f}, r {r:.4f}")
# The pairs are the recorded calls' changes, in call order.
calls = [c for c in j["calls"] if c["residual_change"] is not None]
assert [c["residual_change"] for c in calls] == j["modulated"]["residual_change"]
