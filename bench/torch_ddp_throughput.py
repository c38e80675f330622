#!/usr/bin/env python3
"""PyTorch DDP's side of bench/ddp_throughput.cpp (issue 16): the same two models, batches,
optimizer and timing, under torchrun. mlp4: 1024-4096-1024-4096-10 with GELU, fp32 (TF32 off),
batch 256 per rank; wide8: 8 layers of 8192 with GELU, bf16, batch 1024 per rank; AdamW
lr 1e-4, cross-entropy on random data (logits in float32). Each rank times --steps steps after
--warmup, the device synchronised and the ranks at a barrier before the clock starts and stops;
rank 0 prints samples per second for the group. --no-ddp runs the plain model on one GPU (the
scaling baseline), as Kiln's --no-ddp.

    torchrun --nproc-per-node 2 bench/torch_ddp_throughput.py --model wide8
    python3 bench/torch_ddp_throughput.py --model wide8 --no-ddp

Output (rank 0), one greppable line, as Kiln's:
    RESULT torch_ddp_throughput model=mlp4 world=2 ddp=1 batch_per_rank=256 step_ms=1.23 samples_per_s=416000
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

MODELS = {"mlp4": ([1024, 4096, 1024, 4096, 10], torch.float32, 256),
          "wide8": ([8192] * 9, torch.bfloat16, 1024)}


def mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(nn.GELU())
    return nn.Sequential(*layers)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=sorted(MODELS), default="mlp4")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--batch", type=int, default=0, help="per rank (default: the model's)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--scale", type=int, default=1, help="divide the layer widths (quick CPU checks)")
    p.add_argument("--no-ddp", action="store_true")
    a = p.parse_args()
    sizes, dtype, batch = MODELS[a.model]
    sizes = [max(1, s // a.scale) for s in sizes[:-1]] + [max(1, sizes[-1] // a.scale) if a.model == "wide8" else sizes[-1]]
    batch = a.batch or batch
    torch.backends.cuda.matmul.allow_tf32 = False
    ddp = not a.no_ddp
    if ddp:
        dist.init_process_group("nccl" if a.device == "cuda" else "gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if ddp else (0, 1)
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local}" if a.device == "cuda" else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = mlp(sizes).to(device=device, dtype=dtype)
    net = nn.parallel.DistributedDataParallel(model, device_ids=[local] if device.type == "cuda" else None) if ddp else model
    torch.manual_seed(1 + rank)
    x = torch.randn(batch, sizes[0]).to(device=device, dtype=dtype)
    y = torch.randn(batch, sizes[-1]).argmax(1).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad()
        F.cross_entropy(net(x).float(), y).backward()
        opt.step()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if ddp:
            dist.barrier()

    for _ in range(a.warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    sync()
    step_s = (time.perf_counter() - t0) / a.steps
    if rank == 0:
        print(f"RESULT torch_ddp_throughput model={a.model} world={world} ddp={int(ddp)} batch_per_rank={batch} "
              f"step_ms={step_s * 1e3:.3f} samples_per_s={batch * world / step_s:.0f}", flush=True)
    if ddp:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
