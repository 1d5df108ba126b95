#!/usr/bin/python3
# What docs/analysis.md shows: per-layer weight norms across the checkpoints of a run, and the
# update-to-weight ratio ||W_b - W_a|| / ||W_a|| of every tensor between the last two, read
# with h5py and numpy alone. Usage: checkpoint_norms.py CHECKPOINT_DIR
import glob
import sys

import h5py
import numpy as np

files = sorted(glob.glob(f"{sys.argv[1]}/step-*.h5"))
if len(files) < 2:
    sys.exit(f"need two checkpoints in {sys.argv[1]}, found {len(files)}")


def weights(path):
    with h5py.File(path, "r") as f:
        step = int(f.attrs["step"])
        tensors = {name: d[()] for name, d in f.items() if isinstance(d, h5py.Dataset)}
    return step, tensors


# By step, not by name: past step 999,999 the names have more digits.
runs = sorted((weights(p) for p in files), key=lambda run: run[0])
n_layer = 1 + max(int(n.split(".")[1]) for n in runs[0][1] if n.startswith("h."))
print("step  " + "  ".join(f"h.{i:<6d}" for i in range(n_layer)))
for step, t in runs:
    norms = [np.sqrt(sum(np.sum(v.astype(np.float64) ** 2) for n, v in t.items()
                         if n.startswith(f"h.{i}."))) for i in range(n_layer)]
    print(f"{step:<5d} " + "  ".join(f"{x:8.4f}" for x in norms))
(sa, a), (sb, b) = runs[-2], runs[-1]
print(f"update / weight, step {sa} -> {sb}:")
for name in sorted(a):
    ratio = np.linalg.norm(b[name] - a[name]) / max(np.linalg.norm(a[name]), 1e-30)
    print(f"  {name:32s} {ratio:.3e}")
