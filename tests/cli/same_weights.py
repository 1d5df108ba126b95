#!/usr/bin/python3
# Whether two gridlm weights files hold the same bits in every tensor (a resumed run against one
# that never stopped). Usage: same_weights.py A.h5 B.h5   Prints "weights: N of M tensors
# identical"; the caller checks the counts.
import sys

import h5py
import numpy as np

with h5py.File(sys.argv[1]) as a, h5py.File(sys.argv[2]) as b:
    names = [n for n in a if isinstance(a[n], h5py.Dataset)]
    same = [n for n in names if n in b and np.array_equal(a[n][()], b[n][()])]
    print(f"weights: {len(same)} of {len(names)} tensors identical")
