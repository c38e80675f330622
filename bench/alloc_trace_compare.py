#!/usr/bin/env python3
"""One comparison of the caching allocators on the allocation traces: Kiln with classic and
with expandable segments (bench/alloc_trace_replay, C++), PyTorch with its default settings
and with expandable_segments:True (bench/alloc_trace_replay.py, a subprocess per setting),
all in one run. Prints every figure, then one table per trace with the ratio of Kiln's
expandable peak reserved to the lower of PyTorch's two, and whether Kiln's target (ratio at
most 1, no non-releasable bytes) holds.

    python3 bench/alloc_trace_compare.py --kiln build-gpu/bench/alloc_trace_replay --device cuda bench/traces/*.trace

Without PyTorch (or with --no-torch, or --device cpu) only Kiln's figures are printed. MB are
10^6 bytes, as the issue quotes them. --json PATH also writes every row as JSON.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def kiln_rows(binary, device, traces):
    out = subprocess.run([binary, "--device", device, "--json", *traces], check=True, stdout=subprocess.PIPE,
                         text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def torch_rows(traces):
    try:
        import torch  # noqa: F401  (only to know whether PyTorch with CUDA is here)
        if not torch.cuda.is_available():
            return [], "PyTorch sees no CUDA device"
    except ImportError:
        return [], "PyTorch is not installed"
    out = subprocess.run([sys.executable, os.path.join(HERE, "alloc_trace_replay.py"), "--json", *traces], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")], ""


def mb(v):
    return "-" if v is None else f"{v / 1e6:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default="build/bench/alloc_trace_replay", help="Kiln's alloc_trace_replay binary")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--json", metavar="PATH", help="also write every row to PATH, one JSON object per line")
    ap.add_argument("traces", nargs="+")
    args = ap.parse_args()

    rows = kiln_rows(args.kiln, args.device, args.traces)
    why = "--no-torch" if args.no_torch else "PyTorch replays on CUDA only" if args.device != "cuda" else ""
    if not why:
        more, why = torch_rows(args.traces)
        rows += more
    if args.json:
        with open(args.json, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")

    print(f"{'trace':<24} {'allocator':<18} {'events':>7} {'peak resv':>12} {'peak alloc':>12} {'nonrel@pk':>11} "
          f"{'max nonrel':>11} {'end nonrel':>10} {'dev+':>6} {'dev-':>6} {'map':>6} {'unmap':>6} {'ms':>9}")
    for r in sorted(rows, key=lambda r: (r["trace"], r["allocator"], r["config"])):
        calls = ["-" if r.get(k) is None else r[k] for k in ("map_calls", "unmap_calls")]
        print(f"{r['trace']:<24} {r['allocator'] + ' ' + r['config']:<18} {r['events']:>7} {r['peak_reserved']:>12} "
              f"{r['peak_allocated']:>12} {r['non_releasable_at_peak']:>11} {r['peak_non_releasable']:>11} "
              f"{r['end_non_releasable']:>10} {r['device_allocs']:>6} {r['device_frees']:>6} {calls[0]:>6} "
              f"{calls[1]:>6} {r['ms']:>9.1f}")
    if why:
        print(f"\nPyTorch not compared: {why}.")

    by = {(r["trace"], r["allocator"], r["config"]): r for r in rows}
    traces = sorted({r["trace"] for r in rows})
    print(f"\nPeak reserved, MB (10^6 bytes); ratio = Kiln expandable / min(PyTorch default, PyTorch expandable)")
    print(f"{'trace':<24} {'PT default':>10} {'PT expand':>10} {'Kiln dflt':>10} {'Kiln expand':>11} {'ratio':>7} "
          f"{'K nonrel@pk':>11} {'K map/unmap':>12}  target")
    met = compared = 0
    for t in traces:
        kd, ke = by.get((t, "kiln", "default")), by.get((t, "kiln", "expandable"))
        pd, pe = by.get((t, "pytorch", "default")), by.get((t, "pytorch", "expandable"))
        ratio, verdict = None, "no PyTorch figures"
        if ke and pd and pe:
            compared += 1
            best = min(pd["peak_reserved"], pe["peak_reserved"])
            ratio = ke["peak_reserved"] / best
            ok = ke["peak_reserved"] <= best
            met += ok
            verdict = ("met" if ok else "MISSED") + (
                "" if ke["non_releasable_at_peak"] == 0 else
                f" (non-releasable {mb(ke['non_releasable_at_peak'])} MB at peak: free parts of pages in use)")
        calls = f"{ke['map_calls']}/{ke['unmap_calls']}" if ke else "-"
        print(f"{t:<24} {mb(pd and pd['peak_reserved']):>10} {mb(pe and pe['peak_reserved']):>10} "
              f"{mb(kd and kd['peak_reserved']):>10} {mb(ke and ke['peak_reserved']):>11} "
              f"{'-' if ratio is None else f'{ratio:.3f}':>7} {mb(ke and ke['non_releasable_at_peak']):>11} "
              f"{calls:>12}  {verdict}")
    if compared:
        print(f"\nKiln expandable at or below the lower PyTorch setting on {met} of {compared} traces.")
        torch_version = next((r.get("torch") for r in rows if r["allocator"] == "pytorch"), None)
        if torch_version:
            print(f"PyTorch {torch_version}.")
    return 0 if not compared or met == compared else 1


if __name__ == "__main__":
    sys.exit(main())
