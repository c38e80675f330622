#!/usr/bin/env python3
"""Replays allocation traces through PyTorch's CUDA caching allocator
(torch.cuda.caching_allocator_alloc / caching_allocator_delete), once with the default
settings and once with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, and reports what
bench/alloc_trace_replay (Kiln) reports for the same traces: peak reserved and peak allocated
bytes, non-releasable (inactive split) bytes at the moment of peak reserved, at their own peak
and at the end, the device calls, and the replay time.

PyTorch reads PYTORCH_CUDA_ALLOC_CONF when CUDA initialises, so each setting runs in a
subprocess of its own with the variable set (this script with --worker).

    python3 bench/alloc_trace_replay.py [--setting default|expandable|both] [--json] TRACE...

Columns "dev+" / "dev-" are num_device_alloc / num_device_free: cudaMalloc / cudaFree calls
by default; with expandable segments PyTorch counts a mapping of one or more pages (20 MiB
pages in the large pool, 2 MiB in the small) as one. PyTorch keeps expandable segments out
of its inactive_split statistics, so its non-releasable bytes read 0 there.
"""
import argparse
import json
import os
import subprocess
import sys
import time

SETTINGS = {"default": None, "expandable": "expandable_segments:True"}


def read_trace(path):
    events = []
    with open(path) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split()
            events.append((parts[0] == "a", int(parts[1]), int(parts[2]) if parts[0] == "a" else 0))
    return events


def replay(torch, events, poll):
    """Replays the events on a fresh cache; with `poll`, reads the statistics after every
    event to find the non-releasable bytes at the moment of peak reserved."""
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.reset_accumulated_memory_stats()
    stream = torch.cuda.current_stream()
    live = {}
    peak_reserved, at_peak = -1, 0
    torch.cuda.synchronize()
    start = time.perf_counter()
    for alloc, ident, size in events:
        if alloc:
            live[ident] = torch.cuda.caching_allocator_alloc(size, 0, stream)
        else:
            torch.cuda.caching_allocator_delete(live.pop(ident))
        if poll:
            s = torch.cuda.memory_stats()
            if s["reserved_bytes.all.current"] > peak_reserved:
                peak_reserved = s["reserved_bytes.all.current"]
                at_peak = s["inactive_split_bytes.all.current"]
    torch.cuda.synchronize()
    ms = (time.perf_counter() - start) * 1e3
    stats = torch.cuda.memory_stats()
    for p in live.values():
        torch.cuda.caching_allocator_delete(p)
    torch.cuda.empty_cache()
    return stats, ms, at_peak


def worker(setting, traces):
    import torch

    assert torch.cuda.is_available(), "PyTorch sees no CUDA device"
    for path in traces:
        events = read_trace(path)
        stats, ms, _ = replay(torch, events, poll=False)       # timed, untouched by polling
        polled, _, at_peak = replay(torch, events, poll=True)  # same requests: same statistics
        assert polled["reserved_bytes.all.peak"] == stats["reserved_bytes.all.peak"], "replay not deterministic"
        print(json.dumps({
            "allocator": "pytorch", "device": "cuda", "trace": os.path.basename(path), "config": setting,
            "events": len(events), "torch": torch.__version__,
            "peak_reserved": stats["reserved_bytes.all.peak"],
            "peak_allocated": stats["allocated_bytes.all.peak"],
            "non_releasable_at_peak": at_peak,
            "peak_non_releasable": stats["inactive_split_bytes.all.peak"],
            "end_non_releasable": stats["inactive_split_bytes.all.current"],
            "end_reserved": stats["reserved_bytes.all.current"],
            "device_allocs": stats["num_device_alloc"], "device_frees": stats["num_device_free"],
            "map_calls": None, "unmap_calls": None, "ms": round(ms, 3),
        }), flush=True)


def run_setting(setting, traces):
    """The worker's JSON lines for one setting, run in a subprocess with its environment."""
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if SETTINGS[setting]:
        env["PYTORCH_CUDA_ALLOC_CONF"] = SETTINGS[setting]
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", setting, *traces], env=env,
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def print_table(rows):
    print(f"{'trace':<24} {'config':<18} {'events':>7} {'peak resv':>12} {'peak alloc':>12} {'nonrel@pk':>11} "
          f"{'max nonrel':>11} {'end nonrel':>10} {'dev+':>6} {'dev-':>6} {'ms':>9}")
    for r in rows:
        print(f"{r['trace']:<24} {r['allocator'] + ' ' + r['config']:<18} {r['events']:>7} {r['peak_reserved']:>12} "
              f"{r['peak_allocated']:>12} {r['non_releasable_at_peak']:>11} {r['peak_non_releasable']:>11} "
              f"{r['end_non_releasable']:>10} {r['device_allocs']:>6} {r['device_frees']:>6} {r['ms']:>9.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setting", choices=["default", "expandable", "both"], default="both")
    ap.add_argument("--json", action="store_true", help="one JSON object per line")
    ap.add_argument("--worker", choices=list(SETTINGS), help=argparse.SUPPRESS)
    ap.add_argument("traces", nargs="+")
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.traces)
        return
    settings = list(SETTINGS) if args.setting == "both" else [args.setting]
    rows = [r for s in settings for r in run_setting(s, args.traces)]
    rows.sort(key=lambda r: (r["trace"], r["config"]))
    if args.json:
        for r in rows:
            print(json.dumps(r))
    else:
        print_table(rows)


if __name__ == "__main__":
    main()
