#!/usr/bin/env python3
"""Records the allocations of a PyTorch training loop on the GPU with
torch.cuda.memory._record_memory_history / _snapshot and writes them as an allocation trace
(the format of bench/traces/, see scripts/make_alloc_traces.py), so the trace replays compare
Kiln's and PyTorch's allocators on what a real PyTorch program asks for.

The loop: an MLP (by default 1024-4096-4096-1024-10, GELU) trained with AdamW and autograd,
batch sizes cycling through uneven values (ragged batches, as real data loaders and
variable sequence lengths give), a few hundred steps. The trace keeps the sizes asked for
(requested bytes) and the order of allocations and frees; a block freed on another stream's
behalf (free_requested, then free_completed) counts as freed at the request.

    python3 bench/alloc_trace_record_torch.py [--steps 300] [--widths 1024,4096,4096,1024,10]
        [--batches 64,256,100,512,37,384,200,1000] [--out bench/traces/pytorch_training.trace]

Run it with PyTorch's default allocator settings (PYTORCH_CUDA_ALLOC_CONF unset): the
replay, not the recording, compares the settings.
"""
import argparse
import os
import sys


def record(steps, widths, batches):
    import torch

    assert torch.cuda.is_available(), "PyTorch sees no CUDA device"
    torch.manual_seed(0)
    dev = torch.device("cuda")
    # Events only: no tracebacks (context=None), which would slow every allocation.
    torch.cuda.memory._record_memory_history(enabled="all", context=None, max_entries=10_000_000)
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers[:-1]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(steps):
        batch = batches[step % len(batches)]
        x = torch.randn(batch, widths[0], device=dev)
        y = x[:, : widths[-1]].argmax(dim=1)  # learnable: the largest of the first inputs
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 50 == 0 or step + 1 == steps:
            print(f"step {step:4d}  batch {batch:5d}  loss {loss.item():.4f}", flush=True)
    del model, opt, x, y, loss
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    return snapshot["device_traces"][torch.cuda.current_device()], torch.__version__


def to_trace(entries):
    """Trace lines from the history: an id per alloc, a free per user free, and frees for
    whatever is still live at the end (cuBLAS workspaces and the like)."""
    lines, live, next_id, allocs = [], {}, 0, 0
    for e in entries:
        action, addr = e["action"], e["addr"]
        if action == "alloc":
            live[addr] = next_id
            lines.append(f"a {next_id} {e['size']}")
            next_id += 1
            allocs += 1
        elif action in ("free_requested", "free_completed") and addr in live:
            lines.append(f"f {live.pop(addr)}")
    lines += [f"f {i}" for i in sorted(live.values())]
    return lines, allocs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--widths", default="1024,4096,4096,1024,10")
    ap.add_argument("--batches", default="64,256,100,512,37,384,200,1000")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "traces",
                                                  "pytorch_training.trace"))
    args = ap.parse_args()
    widths = [int(w) for w in args.widths.split(",")]
    batches = [int(b) for b in args.batches.split(",")]
    if os.environ.get("PYTORCH_CUDA_ALLOC_CONF"):
        print("note: PYTORCH_CUDA_ALLOC_CONF is set; the trace records requests, so it does not matter", file=sys.stderr)
    entries, version = record(args.steps, widths, batches)
    lines, allocs = to_trace(entries)
    with open(args.out, "w") as f:
        f.write(f"# pytorch_training: written by bench/alloc_trace_record_torch.py with PyTorch {version} "
                f"({args.steps} AdamW steps of a {'-'.join(map(str, widths))} GELU MLP, batch sizes cycling "
                f"{'/'.join(map(str, batches))})\n")
        f.write("\n".join(lines) + "\n")
    print(f"{len(lines)} events ({allocs} allocations) written to {args.out}")


if __name__ == "__main__":
    main()
