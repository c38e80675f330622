#!/usr/bin/env python3
"""PyTorch's side of bench/fused_adamw.cpp, timed the same way: one torch.optim.AdamW step
over the parameters of the MLP 1024-4096-1024-4096-10 (float32, 12.6 M parameters in 8
tensors) on cuda:0, with fused=True (one _fused_adamw_ launch plus the step-count
increment), foreach=True (the _foreach_* multi-tensor ops) and the for-loop implementation.
GPU time: CUDA events around 20 queued steps after a ~5 ms spin kernel, median of 9 repeats
after 5 warm-up steps; GB/s at 28 bytes per parameter per step; wall time: 200 steps, then a
synchronize.

    python3 bench/fused_adamw_torch.py
"""
import time

import torch

from torch_timing import device_ms_per_call


def wall_us(f, steps=200):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        f()
    torch.cuda.synchronize()
    return 1e6 * (time.perf_counter() - t0) / steps


def main():
    if not torch.cuda.is_available():
        print("fused_adamw_torch: no GPU visible")
        return
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    sizes = [1024, 4096, 1024, 4096, 10]
    layers = [torch.nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])]
    model = torch.nn.Sequential(*[m for layer in layers for m in (layer, torch.nn.GELU())][:-1]).cuda()
    params = list(model.parameters())
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    numel = sum(p.numel() for p in params)
    nbytes = 28.0 * numel
    print(f"fused_adamw_torch: one AdamW step over MLP 1024-4096-1024-4096-10 (float32, {numel} parameters in "
          f"{len(params)} tensors) on {torch.cuda.get_device_name(0)}, PyTorch {torch.__version__}")
    print(f"{'implementation':<28} {'GPU us':>10} {'GB/s':>10} {'wall us':>10}")
    for name, kwargs in (("torch_fused", {"fused": True}), ("torch_foreach", {"foreach": True}),
                         ("torch_for_loop", {"foreach": False})):
        copies = [p.detach().clone().requires_grad_() for p in params]
        for c, p in zip(copies, params):
            c.grad = p.grad.clone()
        opt = torch.optim.AdamW(copies, lr=1e-3, weight_decay=1e-2, **kwargs)
        gpu_us = 1e3 * device_ms_per_call(opt.step, iters=20, warmup=5)
        host_us = wall_us(opt.step)
        print(f"{name:<28} {gpu_us:10.1f} {nbytes / gpu_us / 1e3:10.0f} {host_us:10.1f}")
        print(f"RESULT fused_adamw_{name}_gpu_us {gpu_us:.2f}")
        print(f"RESULT fused_adamw_{name}_wall_us {host_us:.2f}")


if __name__ == "__main__":
    main()
