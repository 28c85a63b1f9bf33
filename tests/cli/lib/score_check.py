#!/usr/bin/env python3
"""score_check.py SCORE_JSON TEACHER_FILE TRAJ_DIR: recomputes `avdit score teacher`'s numbers from
the saved trajectories with numpy, independently of the C++ code: for every candidate c and step k,
error[k] = |c[k] - t[k]| / |t[k] - t[k-1]| and SNR[k] = 10 log10(|t[k]|^2 / |c[k] - t[k]|^2) per
modality (L2 over the whole latent, float64), against score.json's per-step values (relative
1e-9; "inf" where the candidate equals the teacher bit for bit), and each table mean. Exit 1 naming
the first disagreement."""
import json
import math
import sys

import numpy as np
from safetensors.numpy import load_file

report = json.load(open(sys.argv[1]))
teacher = load_file(sys.argv[2])
traj_dir = sys.argv[3]


def close(got, want, what):
    if want == "inf" or (isinstance(want, float) and math.isinf(want)):
        ok = got == "inf"
    elif want is None:
        ok = got is None
    else:
        ok = isinstance(got, (int, float)) and abs(got - want) <= 1e-9 * max(abs(want), 1e-30)
    if not ok:
        sys.exit(f"{what}: avdit score says {got}, numpy {want}")


checked = 0
for cand in report["candidates"]:
    c = load_file(f"{traj_dir}/{cand['name']}-p1.safetensors")
    for m in ("video", "audio"):
        t = teacher[f"latents_{m}"].astype(np.float64)
        x = c[f"latents_{m}"].astype(np.float64)
        assert x.shape == t.shape, (cand["name"], m, x.shape, t.shape)
        errs, snrs = [], []
        for k in range(1, t.shape[0]):
            update = np.linalg.norm((t[k] - t[k - 1]).ravel())
            dist = np.linalg.norm((x[k] - t[k]).ravel())
            errs.append(dist / update if update > 0 else None)
            snrs.append("inf" if dist == 0 else 20 * math.log10(np.linalg.norm(t[k].ravel()) / dist))
        got = cand[m]["prompts"][0]
        for k, (e, s) in enumerate(zip(errs, snrs)):
            close(got["error_by_step"][k], e, f"{cand['name']} {m} error step {k + 1}")
            close(got["snr_db_by_step"][k], s, f"{cand['name']} {m} SNR step {k + 1}")
            checked += 2
        close(cand[m]["error"], float(np.mean([e for e in errs if e is not None])), f"{cand['name']} {m} mean error")
print(f"score_check: {checked} per-step values of {len(report['candidates'])} candidates agree with numpy")
