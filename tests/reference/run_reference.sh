#!/usr/bin/env bash
# Trains a small model (context 48: two causal attention blocks) for 10 steps with gridlm, writing the reference dump, then replays it in
# PyTorch (torch_reference.py): logits, loss, every gradient by name, and the 10 AdamW losses.
# The optimiser settings are strong (lr 3e-2, weight decay 0.5, warmup 2, clipping active) so
# that a mistake in clipping, decay groups or the schedule moves the losses past tolerance.
# Usage: run_reference.sh GRIDLM WORKDIR tied|untied
set -euo pipefail
gridlm=$1
work=$2
variant=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
extra=(--set model.vocab_size=64)
if [[ $variant == untied ]]; then
  # 61 is not a multiple of the vocabulary padding: padded logit columns must stay invisible.
  extra=(--set model.vocab_size=61 --set model.tied_embeddings=false
         --set train.decay_embeddings=true --set train.decay_norms_and_biases=true)
fi
"$gridlm" train --set model.seq_len=48 --set model.n_layer=2 \
  --set model.n_head=2 --set model.d_model=32 --set train.micro_batch=2 \
  --set train.grad_accum=2 --set train.steps=10 --set train.lr=3e-2 --set train.min_lr=3e-3 \
  --set train.weight_decay=0.5 --set train.warmup_steps=2 --set train.decay_steps=10 \
  --set train.grad_clip=1.0 --set train.log_every=100 --set output.dir="$work" \
  --set output.weights= --set output.reference_dump="$work/reference-$variant.h5" "${extra[@]}"
exec /usr/bin/python3 "$here/torch_reference.py" "$work/reference-$variant.h5"
