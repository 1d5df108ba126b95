#!/usr/bin/python3
# PyTorch peer of gridlm's training benchmark: the same GPT-2 style model and
# the same per-step work (forward, backward, global-norm clip, AdamW with
# gridlm's default hyperparameters) on CPU, so gridlm's step time can be
# compared against a widely used framework on the same machine and threads.
#
# With --world N it is the data-parallel peer: N processes (gloo, on this
# machine) under DistributedDataParallel, each with batch / N sequences, so
# the global batch is the same; the step time is rank 0's.
#
# Usage: /usr/bin/python3 bench/torch_gpt.py --config tiny|small|124m
#            [--steps N] [--warmup N] [--threads N] [--world N]
#            [--n-layer --n-head --d-model --vocab --seq --batch]
# Last line: RESULT tokens_per_s=<f> ms_per_step=<median> threads=<n> config=<name>

import argparse
import math
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    "tiny": dict(n_layer=4, n_head=4, d_model=128, vocab=512, seq=128, batch=8),
    "small": dict(n_layer=6, n_head=6, d_model=384, vocab=8192, seq=256, batch=4),
    "124m": dict(n_layer=12, n_head=12, d_model=768, vocab=50257, seq=256, batch=4),
}


class Block(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(d_model, eps=1e-5)
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.attn_proj = nn.Linear(d_model, d_model)
        self.ln_2 = nn.LayerNorm(d_model, eps=1e-5)
        self.c_fc = nn.Linear(d_model, 4 * d_model)
        self.mlp_proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x, mask):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        # Explicit attention: torch 1.13 has no fused scaled_dot_product_attention,
        # and gridlm also materialises the T x T scores.
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, seq, n_layer, n_head, d_model):
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(seq, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model, eps=1e-5)
        # Built once: the mask is not part of what is being timed. A plain attribute, not a
        # buffer: DDP would broadcast it, and gloo has no bool type.
        self.mask = ~torch.ones(seq, seq, dtype=torch.bool).tril()
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        mask = self.mask[:T, :T]
        for block in self.blocks:
            x = block(x, mask)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied embeddings
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--world", type=int, default=1)
    ap.add_argument("--n-layer", type=int)
    ap.add_argument("--n-head", type=int)
    ap.add_argument("--d-model", type=int)
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--seq", type=int)
    ap.add_argument("--batch", type=int)
    args = ap.parse_args()
    cfg = dict(CONFIGS[args.config])
    for key in cfg:
        val = getattr(args, key)
        if val is not None:
            cfg[key] = val
    if cfg["d_model"] % cfg["n_head"] != 0:
        ap.error(f"d_model {cfg['d_model']} is not divisible by n_head {cfg['n_head']}")
    if args.steps < 1 or args.warmup < 0 or args.threads < 1 or args.world < 1:
        ap.error("need --steps >= 1, --warmup >= 0, --threads >= 1, --world >= 1")
    if cfg["batch"] % args.world != 0:
        ap.error(f"batch {cfg['batch']} is not divisible by --world {args.world}")
    return args, cfg


def main():
    args, cfg = parse_args()
    if args.world == 1:
        train(0, args, cfg)
    else:
        import torch.multiprocessing as mp
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
        mp.spawn(train, args=(args, cfg), nprocs=args.world, join=True)


def train(rank, args, cfg):
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    model = GPT(cfg["vocab"], cfg["seq"], cfg["n_layer"], cfg["n_head"], cfg["d_model"])
    if args.world > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo", rank=rank, world_size=args.world)
        model = nn.parallel.DistributedDataParallel(model)
    # Same grouping and hyperparameters as gridlm's AdamW defaults, so both
    # sides do the same optimizer work per step.
    decay, no_decay = [], []
    for m in model.modules():
        for name, p in m.named_parameters(recurse=False):
            (decay if isinstance(m, nn.Linear) and name == "weight" else no_decay).append(p)
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    params = list(model.parameters())
    n_params = sum(p.numel() for p in params)

    B, T = cfg["batch"] // args.world, cfg["seq"]
    say = print if rank == 0 else (lambda *a, **k: None)
    say(f"config={args.config} " + " ".join(f"{k}={v}" for k, v in cfg.items())
        + f" params={n_params} threads={args.threads} world={args.world} "
        + f"torch={torch.__version__}")

    gen = torch.Generator().manual_seed(1234 + rank)
    times = []
    for step in range(args.warmup + args.steps):
        # Random tokens are drawn outside the timed region.
        batch = torch.randint(0, cfg["vocab"], (B, T + 1), generator=gen)
        inputs, targets = batch[:, :-1], batch[:, 1:]
        t0 = time.perf_counter()
        loss = model(inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        ms = (time.perf_counter() - t0) * 1e3
        kind = "warmup" if step < args.warmup else "step"
        if step >= args.warmup:
            times.append(ms)
        say(f"{kind} {step:4d} loss={loss.item():.4f} ms={ms:.2f}", flush=True)

    med = statistics.median(times)
    tok_s = B * args.world * T / (med / 1e3)
    say(f"RESULT tokens_per_s={tok_s:.1f} ms_per_step={med:.3f} "
          f"threads={args.threads} config={args.config}")


if __name__ == "__main__":
    main()
