#!/usr/bin/env python3
"""PyTorch's side of bench/cross_entropy.cpp, timed the same way: host microseconds to issue
a batch of calls (the stream synchronised, untimed, between batches; median of 51 rounds)
and GPU microseconds per call (CUDA events around back-to-back calls queued behind a ~5 ms
spin kernel, median of 9 repeats), float32 logits [N, C] and int64 targets.

Variants:
  fwd             F.cross_entropy(x, t) under no_grad (log_softmax + nll_loss kernels)
  fwdbwd_aten     the kernels autograd runs, called directly: _log_softmax, nll_loss_forward,
                  nll_loss_backward, _log_softmax_backward_data (no autograd engine), the
                  like-for-like comparison with Kiln's _cross_entropy_forward + _backward
  fwdbwd_autograd torch.autograd.grad(F.cross_entropy(x, t), x): what a training step pays

    python3 bench/torch_cross_entropy.py
"""
import statistics
import time

import torch
import torch.nn.functional as F

from torch_timing import device_ms_per_call as median_gpu_ms

CASES = ((256, 10), (4096, 1000), (32768, 32000))


def median_host_us(variants, calls, rounds=51):
    """Each round runs a batch of every variant in turn; median host us per call of each."""
    samples = {name: [] for name in variants}
    for name, f in variants.items():  # warm-up batch
        for _ in range(calls):
            f()
        torch.cuda.synchronize()
    for _ in range(rounds):
        for name, f in variants.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            samples[name].append((t1 - t0) / calls * 1e6)
    return {name: statistics.median(s) for name, s in samples.items()}


def main():
    print(f"torch cross_entropy: float32 logits [N, C], int64 targets, {torch.cuda.get_device_name(0)}, "
          f"PyTorch {torch.__version__}")
    print(f"{'shape':<16} {'variant':<40} {'host us/call':>12} {'GPU us/call':>12}")
    for n, c in CASES:
        torch.manual_seed(0)
        x = torch.randn(n, c, device="cuda")
        t = torch.randint(0, c, (n,), device="cuda")
        xg = x.clone().requires_grad_(True)
        one = torch.ones((), device="cuda")

        def fwd():
            with torch.no_grad():
                return F.cross_entropy(x, t)

        def fwdbwd_aten():
            lsm = torch._log_softmax(x, 1, False)
            loss, total_weight = torch.ops.aten.nll_loss_forward(lsm, t, None, 1, -100)
            g = torch.ops.aten.nll_loss_backward(one, lsm, t, None, 1, -100, total_weight)
            return torch._log_softmax_backward_data(g, lsm, 1, x.dtype)

        def fwdbwd_autograd():
            return torch.autograd.grad(F.cross_entropy(xg, t), xg)[0]

        variants = {"fwd": fwd, "fwdbwd_aten": fwdbwd_aten, "fwdbwd_autograd": fwdbwd_autograd}
        labels = {"fwd": "F.cross_entropy (no grad)", "fwdbwd_aten": "aten kernels fwd + bwd (no autograd)",
                  "fwdbwd_autograd": "autograd.grad(F.cross_entropy)"}
        elements = n * c
        calls = 10 if elements >= 1e8 else 50 if elements >= 1e6 else 200
        iters = 10 if elements >= 1e8 else 50
        host = median_host_us(variants, calls)
        for name, f in variants.items():
            gpu_us = median_gpu_ms(f, iters) * 1e3
            print(f"{f'[{n}, {c}]':<16} {labels[name]:<40} {host[name]:12.2f} {gpu_us:12.2f}")
            print(f"RESULT torch_xent_{name}_{n}x{c}_host_us {host[name]:.3f}")
            print(f"RESULT torch_xent_{name}_{n}x{c}_gpu_us {gpu_us:.3f}")


if __name__ == "__main__":
    main()
