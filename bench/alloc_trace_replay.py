#!/usr/bin/env python3
"""Replays allocation traces through PyTorch's CUDA caching allocator
(torch.cuda.caching_allocator_alloc / caching_allocator_delete) and prints the same columns
as bench/alloc_trace_replay (Kiln): peak reserved bytes, peak non-releasable (inactive
split) bytes, and the number of cudaMalloc calls.

    python3 bench/alloc_trace_replay.py TRACE...
"""
import sys

import torch


def read_trace(path):
    with open(path) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split()
            yield (parts[0] == "a", int(parts[1]), int(parts[2]) if parts[0] == "a" else 0)


def main():
    print(f"{'trace':<22} {'events':>8} {'peak reserved':>16} {'peak non-releasable':>22} {'device allocs':>10}")
    for path in sys.argv[1:]:
        events = list(read_trace(path))
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.reset_accumulated_memory_stats()
        stream = torch.cuda.current_stream()
        live = {}
        for alloc, ident, size in events:
            if alloc:
                live[ident] = torch.cuda.caching_allocator_alloc(size, 0, stream)
            else:
                torch.cuda.caching_allocator_delete(live.pop(ident))
        s = torch.cuda.memory_stats()
        name = path.rsplit("/", 1)[-1]
        print(f"{name:<22} {len(events):>8} {s['reserved_bytes.all.peak']:>16} "
              f"{s['inactive_split_bytes.all.peak']:>22} {s['num_device_alloc']:>10}")
        for p in live.values():
            torch.cuda.caching_allocator_delete(p)
    torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
