#!/usr/bin/python3
"""Reads a gridlm dataset with h5py alone, as any user could (docs/formats/dataset.md), checks
what the format promises and prints a summary. With a second file, also checks that both hold
the same tokens (a dataset prepared on different numbers of ranks, say).
Usage: check_dataset.py DATA.h5 [OTHER.h5]"""
import sys

import h5py
import numpy as np


def check(path):
    f = h5py.File(path, "r")
    a = f.attrs
    assert a["format"] == "gridlm-tokens", a["format"]
    assert a["format_version"] == 1
    vocab = int(a["vocab_size"])
    want = np.uint16 if vocab <= 65536 else np.uint32
    for prefix, n_tok, n_doc in (("", "n_tokens", "n_documents"),
                                 ("valid/", "valid_n_tokens", "valid_n_documents")):
        tokens, offsets = f[prefix + "tokens"], f[prefix + "doc_offsets"]
        assert tokens.dtype == want, (prefix, tokens.dtype)
        assert offsets.dtype == np.uint64
        assert tokens.shape == (a[n_tok],) and offsets.shape == (a[n_doc] + 1,)
        assert tokens.chunks is not None
        t, o = tokens[()], offsets[()]
        assert o[0] == 0 and o[-1] == len(t) and np.all(np.diff(o.astype(np.int64)) > 0)
        assert len(t) == 0 or t.max() < vocab
        if a["eos_id"] >= 0 and len(o) > 1:
            assert np.all(t[o[1:] - 1] == a["eos_id"]), "every document ends with eos"
    assert f["tokenizer/model"].dtype == np.uint8 and f["tokenizer/model"].size > 0
    assert isinstance(a["created_by"], str) and "prepare-data" in a["created_by"]
    print(f"{path}: gridlm-tokens v1, vocabulary {vocab}, {a['n_tokens']} tokens in "
          f"{a['n_documents']} documents, validation {a['valid_n_documents']} documents; "
          f"made by: {a['created_by']}")
    return f


f = check(sys.argv[1])
if len(sys.argv) > 2:
    g = check(sys.argv[2])
    for name in ("tokens", "doc_offsets", "valid/tokens", "valid/doc_offsets", "tokenizer/model"):
        assert np.array_equal(f[name][()], g[name][()]), name
    print("same tokens, offsets and tokenizer")
print("dataset ok")
