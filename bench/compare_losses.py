#!/usr/bin/env python3
# Whether two gridlm runs' losses (metrics.jsonl) agree: prints the largest difference of A
# from B at any step, relative to B, and exits 1 past the tolerance.
# Usage: compare_losses.py A/metrics.jsonl B/metrics.jsonl TOLERANCE
import json
import sys


def losses(path):
    return [json.loads(line)["loss"] for line in open(path) if '"loss"' in line]


a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
if not a or len(a) != len(b):
    sys.exit(f"{sys.argv[1]} has {len(a)} losses and {sys.argv[2]} {len(b)}")
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
print(f"{len(a)} losses, largest relative difference {worst:.2e} (tolerance {tol:g})")
sys.exit(0 if worst <= tol else 1)
