#!/usr/bin/python3
# Compares two gridlm weight files (HDF5, one dataset per parameter at its global shape) by
# name: same names, same shapes, and max|a - b| <= TOL * max|a| per tensor. Used to check that a
# tensor-parallel run writes the same model as a single-rank run.
# Usage: compare_weights.py A.h5 B.h5 TOL     Prints "N passed, M failed"; exit 0 if all passed.
import sys

import h5py
import numpy as np


def main():
    a_path, b_path, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
    with h5py.File(a_path, "r") as a, h5py.File(b_path, "r") as b:
        names = sorted(set(a.keys()) | set(b.keys()))
        passed = failed = 0
        for name in names:
            if name not in a or name not in b:
                print(f"FAIL {name}: only in {'A' if name in a else 'B'}")
                failed += 1
                continue
            x, y = a[name][()], b[name][()]
            if x.shape != y.shape:
                print(f"FAIL {name}: shapes {x.shape} and {y.shape}")
                failed += 1
                continue
            diff = float(np.abs(x - y).max())
            limit = tol * float(np.abs(x).max()) + 1e-7
            ok = diff <= limit
            print(f"{'OK  ' if ok else 'FAIL'} {name:32s} {str(x.shape):14s} max|d|={diff:.3e} tol={limit:.3e}")
            passed += ok
            failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
