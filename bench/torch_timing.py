"""The PyTorch benchmarks' one way of timing GPU work (bench/cuda_bench_util.h's, on Kiln's
side): a ~5 ms spin kernel (torch.cuda._sleep) holds the GPU while the host queues `iters`
calls, CUDA events around them give the GPU time per call; the median of `repeats` such
batches after `warmup` calls. Imported by the bench/*torch*.py scripts (run from any
directory: Python puts the script's folder on the path).
"""
import statistics

import torch


def device_ms_per_call(f, iters, repeats=9, warmup=3):
    """GPU milliseconds per call of f (see the module comment)."""
    for _ in range(warmup):
        f()
    torch.cuda.synchronize()
    props = torch.cuda.get_device_properties(0)
    cycles = int(5e-3 * props.clock_rate * 1e3) if hasattr(props, "clock_rate") else int(1e7)
    per_call = []
    for _ in range(repeats):
        torch.cuda._sleep(cycles)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            f()
        stop.record()
        stop.synchronize()
        per_call.append(start.elapsed_time(stop) / iters)
    return statistics.median(per_call)
