#!/usr/bin/python3
# Loads a gridlm checkpoint or weights file into the PyTorch GPT-2 of torch_reference.py (by
# name, at the file's global shapes) and checks that its loss on the tokens of a reference dump
# equals the loss gridlm computed on them from the same weights (a run started with
# --init-from FILE and output.reference_dump: its step-0 loss, before any update).
# Tolerance: |loss_torch - loss_gridlm| <= 1e-4 * |loss_gridlm|.
# Usage: checkpoint_in_torch.py FILE.h5 DUMP.h5      Prints "N passed, M failed".
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import GPT  # noqa: E402


def main():
    weights, dump = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    with h5py.File(weights, "r") as f:
        a = {k: int(f.attrs[k]) for k in ("vocab_size", "seq_len", "n_layer", "n_head", "d_model",
                                          "tied_embeddings")}
        model = GPT(a["vocab_size"], a["seq_len"], a["n_layer"], a["n_head"], a["d_model"],
                    bool(a["tied_embeddings"]))
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(torch.from_numpy(np.asarray(f[name][()])))
        print(f"{weights}: step {int(f.attrs['step'])}, {len(list(model.parameters()))} tensors")
    with h5py.File(dump, "r") as d:
        tokens = torch.from_numpy(np.asarray(d["batches"][()], dtype=np.int64)[0, 0])
        loss_gridlm = float(np.asarray(d["step0/loss"][()]))
    with torch.no_grad():
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
    diff = abs(float(loss) - loss_gridlm)
    ok = diff <= 1e-4 * abs(loss_gridlm)
    print(f"{'OK  ' if ok else 'FAIL'} loss torch {float(loss):.6f} gridlm {loss_gridlm:.6f} "
          f"|d| {diff:.2e}")
    print(f"{int(ok)} passed, {int(not ok)} failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
