#!/usr/bin/env python3
"""Reads the `RESULT key value` lines the CUDA benchmarks print (Kiln's, LibTorch's and
PyTorch's, all from one GPU check run) and prints the side-by-side comparisons against the
issue's targets: eager overhead above the launch floor, the profiler's added cost per op
against Kineto's, bandwidth as a share of copy, GEMM TFLOP/s against PyTorch's nn.Linear.

    scripts/gpu_bench_summary.py OUT/*.txt
"""
import re
import sys


def main(paths):
    r = {}
    for p in paths:
        with open(p, errors="replace") as f:
            for line in f:
                m = re.match(r"RESULT (\S+) (\S+)", line)
                if m:
                    try:
                        r[m.group(1)] = float(m.group(2))
                    except ValueError:  # a verdict (PASS/FAIL), not a figure
                        pass
    rows = []

    # Eager overhead. The target's verdict comes from the one-process comparison (both
    # libraries against one floor, in turns); the two separate processes' figures are kept
    # for reference: their launch floors have differed by up to 1.4 us on the H200 host.
    k, t = r.get("kiln_add_above_floor_us"), r.get("libtorch_add_above_floor_us")
    if k is not None and t is not None:
        rows.append(("eager add, separate processes",
                     f"Kiln {r['kiln_add_us']:.2f} (floor {r['kiln_launch_floor_us']:.2f}, +{k:.2f}); "
                     f"LibTorch {r['libtorch_add_us']:.2f} (floor {r['libtorch_launch_floor_us']:.2f}, +{t:.2f}); "
                     f"ratio {k / t:.2f} (reference only: each process has its own floor)"))
    f, kb, tb = (r.get(f"side_by_side_{x}") for x in ("floor_us", "kiln_add_us", "libtorch_add_us"))
    if f is not None and kb is not None and tb is not None:
        verdict = "met" if kb - f <= 0.25 * (tb - f) else "NOT met"
        rows.append(("eager add, one process",
                     f"floor {f:.2f}; Kiln {kb:.2f} (+{kb - f:.2f}); LibTorch {tb:.2f} (+{tb - f:.2f}); "
                     f"ratio {(kb - f) / (tb - f):.2f} (target <= 0.25: {verdict})"))

    # The profiler's host cost per small CUDA op, Kiln's (profiler_overhead) beside LibTorch's
    # Kineto (libtorch_profiler_overhead), both measured the same way in this run.
    p, ps = r.get("kiln_profiler_added_us"), r.get("kiln_profiler_shapes_added_us")
    if p is not None and ps is not None:
        ko, kn = r.get("kiln_profiler_off_us"), r.get("kiln_profiler_on_us")
        text = f"Kiln +{p:.2f} (" + (f"off {ko:.2f}, on {kn:.2f}; " if ko is not None and kn is not None else "")
        text += f"shapes +{ps:.2f}"
        floor = r.get("kiln_profiler_cupti_floor_us")
        if floor is not None:
            text += f"; CUPTI's kernel records alone +{floor:.2f}, the profiler's own share +{p - floor:.2f}"
            tl, tr = r.get("kiln_profiler_cupti_tie_latency_us"), r.get("kiln_profiler_cupti_tie_runtime_us")
            if tl is not None and tr is not None:
                text += f"; on top of those records, latency timestamps {tl:+.2f}, runtime-API records {tr:+.2f}"
        text += ")"
        t, ts = r.get("libtorch_profiler_added_us"), r.get("libtorch_profiler_shapes_added_us")
        if t is not None and ts is not None:
            text += (f"; LibTorch Kineto +{t:.2f} (off {r['libtorch_profiler_off_us']:.2f}, "
                     f"on {r['libtorch_profiler_on_us']:.2f}; shapes +{ts:.2f})")
        verdict = "met" if p <= 2.0 else "NOT met"
        if p > 2.0 and floor is not None and floor > 2.0:
            verdict += ": CUPTI's kernel records alone exceed it on this host"
        text += f" (target Kiln adds <= 2 us/op: {verdict})"
        rows.append(("profiler, host us added per op", text))

    # CUPTI's own cost per bare launch (cupti_launch_cost): the floor under any profiler on
    # CUPTI's activity API, and what each way of tying a kernel to its op adds to it.
    kr = r.get("cupti_kernel_records_added_us")
    if kr is not None:
        ties = [("latency timestamps", "latency"), ("the profiler's set-up", "profiler_setup"),
                ("runtime-API records", "runtime_records"), ("a callback per launch", "callback")]
        rows.append(("CUPTI, host us added per launch",
                     f"kernel records +{kr:.2f}; on top, "
                     + ", ".join(f"{name} {r[f'cupti_tie_{key}_added_us']:+.2f}"
                                 for name, key in ties if f"cupti_tie_{key}_added_us" in r)))

    for dt in ("float32", "bfloat16"):
        kc, tc = r.get(f"kiln_copy_{dt}_gbs"), r.get(f"torch_copy_{dt}_gbs")
        for op in ("add", "gelu", "sum", "softmax"):
            kv, tv = r.get(f"kiln_{op}_{dt}_gbs"), r.get(f"torch_{op}_{dt}_gbs")
            if kv is None or kc is None:
                continue
            text = f"Kiln {kv:.0f} GB/s = {100 * kv / kc:.1f}% of copy"
            if op in ("add", "gelu"):
                text += f" (target 85%: {'met' if kv >= 0.85 * kc else 'NOT met'})"
            if tv is not None and tc is not None:
                text += f"; PyTorch {tv:.0f} GB/s = {100 * tv / tc:.1f}%; Kiln/PyTorch {kv / tv:.3f}"
            rows.append((f"bandwidth {op} {dt}", text))

    for key in sorted(k for k in r if k.startswith("kiln_gemm_")):
        tkey = key.replace("kiln_", "torch_", 1)
        name = key[len("kiln_gemm_"):-len("_tflops")]
        text = f"Kiln {r[key]:.1f} TFLOP/s"
        if tkey in r:
            ratio = r[key] / r[tkey]
            text += f"; PyTorch {r[tkey]:.1f}; ratio {ratio:.3f} (target >= 0.97: {'met' if ratio >= 0.97 else 'NOT met'})"
        rows.append((f"linear {name}", text))
    # The same, with LibTorch's linear in the same process, taking turns.
    for key in sorted(k for k in r if k.startswith("side_by_side_gemm_") and k.endswith("_kiln_tflops")):
        tkey = key.replace("_kiln_tflops", "_torch_tflops")
        name = key[len("side_by_side_gemm_"):-len("_kiln_tflops")]
        if tkey in r:
            ratio = r[key] / r[tkey]
            rows.append((f"linear {name}, one process",
                         f"Kiln {r[key]:.1f} TFLOP/s; LibTorch {r[tkey]:.1f}; ratio {ratio:.3f} "
                         f"(target >= 0.97: {'met' if ratio >= 0.97 else 'NOT met'})"))

    for name, text in rows:
        print(f"{name:<34} {text}")


if __name__ == "__main__":
    main(sys.argv[1:])
