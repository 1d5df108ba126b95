#!/usr/bin/python3
# Independent PyTorch check of a gridlm reference dump (HDF5).
#
# gridlm writes its initial weights, the batches it trained on and what it
# computed (step-0 logits, loss and gradients, per-step losses); this script
# recomputes all of it with a plain PyTorch GPT so that a bug in gridlm's
# forward, backward, optimizer or LR schedule shows up as a numeric mismatch.
#
# Tolerances (ref = the PyTorch value):
#   logits, gradients : per tensor max|d| <= 1e-4 * max|ref| + 1e-6
#   step-0 loss       : |d| <= 1e-4 * |ref|
#   per-step losses   : |d| <= 1e-3 * |ref|  (AdamW magnifies tiny fp32
#                       differences over several steps, so this is looser)
#
# Usage: /usr/bin/python3 tests/reference/torch_reference.py DUMP.h5
# Exit status 0 only if every check passed.

import math
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

REQUIRED_ATTRS = [
    "vocab_size", "seq_len", "n_layer", "n_head", "d_model",
    "tied_embeddings", "micro_batch", "accum", "steps", "lr", "min_lr",
    "warmup_steps", "decay_steps", "beta1", "beta2", "eps", "weight_decay",
    "decay_embeddings", "decay_norms_and_biases", "grad_clip",
]


class Block(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(d_model, eps=1e-5)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(d_model, 3 * d_model)
        self.attn.c_proj = nn.Linear(d_model, d_model)
        self.ln_2 = nn.LayerNorm(d_model, eps=1e-5)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(d_model, 4 * d_model)
        self.mlp.c_proj = nn.Linear(4 * d_model, d_model)

    def attention(self, h):
        B, T, C = h.shape
        hs = C // self.n_head
        q, k, v = self.attn.c_attn(h).split(C, dim=2)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        # Written out by hand rather than scaled_dot_product_attention, which
        # torch 1.13 does not have and which would hide the exact math.
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.attn.c_proj(y)

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        h = F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh")
        return x + self.mlp.c_proj(h)


class GPT(nn.Module):
    def __init__(self, vocab, seq_len, n_layer, n_head, d_model, tied):
        super().__init__()
        self.tied = tied
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(seq_len, d_model)
        self.h = nn.ModuleList(Block(d_model, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model, eps=1e-5)
        if not tied:
            self.lm_head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        w = self.wte.weight if self.tied else self.lm_head.weight
        return x @ w.t()


def decayed_names(model, decay_embeddings, decay_norms_and_biases):
    names = set()
    for mname, mod in model.named_modules():
        for pname, _ in mod.named_parameters(recurse=False):
            full = f"{mname}.{pname}" if mname else pname
            if isinstance(mod, nn.Linear) and pname == "weight":
                names.add(full)
            elif isinstance(mod, nn.Embedding) and decay_embeddings:
                names.add(full)
            elif isinstance(mod, (nn.LayerNorm, nn.Linear)) and decay_norms_and_biases:
                names.add(full)
    return names


def lr_at(s, a):
    lr, min_lr = float(a["lr"]), float(a["min_lr"])
    warm, total = int(a["warmup_steps"]), int(a["decay_steps"])
    if warm > 0 and s < warm:
        return lr * (s + 1) / warm
    if s >= total:
        return min_lr
    progress = (s - warm) / max(1, total - warm)
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * progress))


class Report:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def record(self, name, diff, tol):
        ok = bool(np.isfinite(diff)) and diff <= tol
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"{'OK  ' if ok else 'FAIL'} {name:<40s} max|d|={diff:.3e} tol={tol:.3e}")

    def tensor(self, name, got, ref):
        got = np.asarray(got, dtype=np.float64)
        ref = np.asarray(ref, dtype=np.float64)
        if got.shape != ref.shape:
            self.failed += 1
            print(f"FAIL {name:<40s} shape {got.shape} != reference {ref.shape}")
            return
        diff = float(np.max(np.abs(got - ref))) if ref.size else 0.0
        scale = float(np.max(np.abs(ref))) if ref.size else 0.0
        self.record(name, diff, 1e-4 * scale + 1e-6)

    def scalar(self, name, got, ref, rel):
        self.record(name, abs(float(got) - float(ref)), rel * abs(float(ref)))


def die(msg):
    print(f"ERROR: {msg}")
    print("0 passed, 1 failed")
    sys.exit(1)


def main():
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} DUMP.h5", file=sys.stderr)
        sys.exit(2)
    path = sys.argv[1]
    if not os.path.isfile(path):
        die(f"dump file not found: {path}")

    # One thread keeps the reduction order fixed from run to run.
    torch.set_num_threads(1)

    with h5py.File(path, "r") as f:
        missing = [k for k in REQUIRED_ATTRS if k not in f.attrs]
        if missing:
            die(f"dump lacks root attributes: {', '.join(missing)}")
        a = {k: f.attrs[k].item() if hasattr(f.attrs[k], "item") else f.attrs[k]
             for k in REQUIRED_ATTRS}
        for grp in ("params", "batches", "step0/logits", "step0/loss", "step0/grads", "losses"):
            if grp not in f:
                die(f"dump lacks /{grp}")
        params = {k: np.asarray(v[()]) for k, v in f["params"].items()}
        grads_ref = {k: np.asarray(v[()]) for k, v in f["step0/grads"].items()}
        batches = np.asarray(f["batches"][()], dtype=np.int64)
        logits_ref = np.asarray(f["step0/logits"][()])
        loss_ref = float(np.asarray(f["step0/loss"][()]))
        losses_ref = np.asarray(f["losses"][()], dtype=np.float64)

    V, T = int(a["vocab_size"]), int(a["seq_len"])
    L, NH, C = int(a["n_layer"]), int(a["n_head"]), int(a["d_model"])
    tied = bool(int(a["tied_embeddings"]))
    B, accum, steps = int(a["micro_batch"]), int(a["accum"]), int(a["steps"])
    print(f"dump {path}: V={V} T={T} L={L} NH={NH} C={C} tied={int(tied)} "
          f"B={B} accum={accum} steps={steps}")
    print("tolerance: logits/grads max|d| <= 1e-4*max|ref| + 1e-6; "
          "loss |d| <= 1e-4*|ref|; per-step losses |d| <= 1e-3*|ref|")

    if C % NH != 0:
        die(f"d_model {C} not divisible by n_head {NH}")
    if batches.shape != (steps, accum, B, T + 1):
        die(f"/batches has shape {batches.shape}, expected {(steps, accum, B, T + 1)}")
    if losses_ref.shape != (steps,):
        die(f"/losses has shape {losses_ref.shape}, expected {(steps,)}")

    model = GPT(V, T, L, NH, C, tied)
    named = dict(model.named_parameters())
    for label, names in (("/params", params), ("/step0/grads", grads_ref)):
        extra = sorted(set(names) - set(named))
        lacking = sorted(set(named) - set(names))
        if extra or lacking:
            die(f"{label} names do not match the model: "
                f"not in model {extra}, missing from dump {lacking}")
    with torch.no_grad():
        for name, p in named.items():
            src = params[name]
            if tuple(src.shape) != tuple(p.shape):
                die(f"/params/{name} has shape {src.shape}, model expects {tuple(p.shape)}")
            p.copy_(torch.from_numpy(src.astype(np.float32)))

    decay = decayed_names(model, int(a["decay_embeddings"]), int(a["decay_norms_and_biases"]))
    groups = [
        {"params": [p for n, p in named.items() if n in decay],
         "weight_decay": float(a["weight_decay"])},
        {"params": [p for n, p in named.items() if n not in decay],
         "weight_decay": 0.0},
    ]
    groups = [g for g in groups if g["params"]]
    opt = torch.optim.AdamW(groups, lr=float(a["lr"]),
                            betas=(float(a["beta1"]), float(a["beta2"])),
                            eps=float(a["eps"]))
    grad_clip = float(a["grad_clip"])
    params_list = list(named.values())

    rep = Report()
    losses = []
    for s in range(steps):
        step_loss = 0.0
        for m in range(accum):
            batch = torch.from_numpy(batches[s, m])
            inputs, targets = batch[:, :-1], batch[:, 1:]
            logits = model(inputs)
            loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
            if s == 0 and m == 0:
                rep.tensor("step0/logits", logits_ref, logits.detach().numpy())
                rep.scalar("step0/loss", loss_ref, loss.item(), 1e-4)
            (loss / accum).backward()
            step_loss += loss.item()
        losses.append(step_loss / accum)

        if s == 0:
            for name, p in named.items():
                rep.tensor(f"step0/grads/{name}", grads_ref[name], p.grad.numpy())

        if grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params_list, grad_clip)
        lr = lr_at(s, a)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        opt.zero_grad(set_to_none=True)

    for s in range(steps):
        rep.scalar(f"losses[{s}]", losses_ref[s], losses[s], 1e-3)

    print(f"{rep.passed} passed, {rep.failed} failed")
    sys.exit(0 if rep.failed == 0 else 1)


if __name__ == "__main__":
    main()
