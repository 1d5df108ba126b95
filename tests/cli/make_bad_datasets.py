#!/usr/bin/python3
"""Makes damaged copies of a good gridlm dataset, one problem each, for the command-line tests
of bad input: truncated, tokens of the wrong type, token ids beyond the vocabulary, an attribute
of the wrong type, a missing attribute, a newer format version, and an index file of shards.
Usage: make_bad_datasets.py GOOD.h5 OUTDIR"""
import os
import shutil
import sys

import h5py
import numpy as np

good, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)


def copy(name):
    path = os.path.join(out, name)
    shutil.copy(good, path)
    return path


with open(copy("truncated.h5"), "r+b") as f:
    f.truncate(os.path.getsize(good) // 2)

with h5py.File(copy("int32_tokens.h5"), "r+") as f:
    tokens = f["tokens"][()].astype(np.int32)
    del f["tokens"]
    f.create_dataset("tokens", data=tokens)

with h5py.File(copy("big_ids.h5"), "r+") as f:
    f["tokens"][5] = f.attrs["vocab_size"] + 10

with h5py.File(copy("string_vocab.h5"), "r+") as f:
    f.attrs["vocab_size"] = str(f.attrs["vocab_size"])

with h5py.File(copy("no_eos.h5"), "r+") as f:
    del f.attrs["eos_id"]

with h5py.File(copy("version2.h5"), "r+") as f:
    f.attrs["format_version"] = np.int64(2)

with open(os.path.join(out, "shards.txt"), "w") as f:
    f.write("shard-000.h5\nshard-001.h5\n")
print("bad datasets made")
