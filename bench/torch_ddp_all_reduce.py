#!/usr/bin/env python3
"""PyTorch's side of bench/dist_all_reduce: torch.distributed.all_reduce (NCCL backend) bus
bandwidth at 1 KiB ... 1 GiB, timed the same way (CUDA events around a run of in-place
all_reduces on the current stream, after a warm-up), printed in the same columns. Bus
bandwidth as nccl-tests defines it: size / time * 2 (n - 1) / n. Run it under torchrun on the
same GPUs, right after the Kiln benchmark:

    torchrun --nproc-per-node 2 bench/torch_ddp_all_reduce.py [--dtype float32] [--max-bytes 1073741824]
"""
import argparse
import os

import torch
import torch.distributed as dist


def time_ms(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    ap.add_argument("--max-bytes", type=int, default=1 << 30)
    ap.add_argument("--iters", type=int, default=200)
    args = ap.parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    world, rank = dist.get_world_size(), dist.get_rank()
    dtype = getattr(torch, args.dtype)
    factor = 2.0 * (world - 1) / world if world > 1 else 1.0
    rows = []
    size = 1024
    while size <= args.max_bytes:
        n = size // torch.tensor([], dtype=dtype).element_size()
        t = torch.randn(n, device="cuda").to(dtype)
        iters = max(5, min(args.iters, args.iters * (1 << 20) // max(size, 1 << 20)))
        dist.barrier()
        us = 1000.0 * time_ms(lambda: dist.all_reduce(t), 5, iters)
        rows.append((size, us))
        size *= 2
    if rank == 0:
        print(f"torch_ddp_all_reduce: {world} ranks (torchrun processes), {args.dtype}, PyTorch {torch.__version__}, "
              f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, bus bandwidth = size / time * {factor:.3f}")
        print(f"{'size':>12} {'torch us':>12} {'torch busbw GB/s':>17}")
        for size, us in rows:
            print(f"{size:>12} {us:>12.2f} {size / (us * 1e3) * factor:>17.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
