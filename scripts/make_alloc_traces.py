#!/usr/bin/env python3
"""Writes the allocation traces that bench/alloc_trace_replay (Kiln) and
bench/alloc_trace_replay.py (PyTorch) replay, so both allocators see the same requests.

Trace format, one event per line ('#' lines are comments):
    a <id> <bytes>    allocate <bytes> and call the block <id>
    f <id>            free block <id>

training_loop.trace   an MLP training loop: persistent weights and optimizer state, then
                      per step activations allocated in the forward pass and freed in
                      reverse in the backward pass, gradients, and temporaries; batch sizes
                      vary between steps (ragged last batches, variable sequence lengths),
                      which is what makes real training loops fragment.
fragmenting.trace     interleaved lifetimes of mixed sizes, chosen to fragment a cache:
                      long-lived small blocks pinned between short-lived large ones.

Two more traces in bench/traces/ are recorded from real programs, not written here:
kiln_training.trace (bench/record_training_trace: a Kiln training loop, through
record_memory_history) and pytorch_training.trace (bench/alloc_trace_record_torch.py: a
PyTorch training loop on a GPU, through torch.cuda.memory._record_memory_history).

Deterministic: fixed seeds; re-running writes identical files.
"""
import os
import random
import sys

KIB, MIB = 1024, 1024 * 1024


class Trace:
    def __init__(self):
        self.lines, self.next_id, self.live = [], 0, set()

    def alloc(self, size):
        i = self.next_id
        self.next_id += 1
        self.lines.append(f"a {i} {size}")
        self.live.add(i)
        return i

    def free(self, i):
        self.lines.append(f"f {i}")
        self.live.remove(i)

    def free_all(self):
        for i in sorted(self.live):
            self.lines.append(f"f {i}")
        self.live.clear()


def training_loop(seed=1):
    rng = random.Random(seed)
    t = Trace()
    widths = [1024, 4096, 4096, 1024, 512]
    weights = []
    for a, b in zip(widths, widths[1:]):
        weights.append(t.alloc(a * b * 4))       # weight
        weights.append(t.alloc(b * 4))           # bias
    state = [t.alloc(t_size) for t_size in [a * b * 4 * 2 for a, b in zip(widths, widths[1:])]]  # Adam moments
    for step in range(300):
        batch = rng.choice([64, 64, 64, 48, 96, 128, 37])
        seq = rng.choice([1, 8, 16, 32])
        rows = batch * seq
        acts = [t.alloc(rows * widths[0] * 4)]   # input
        for w in widths[1:]:
            acts.append(t.alloc(rows * w * 4))   # pre-activation
            acts.append(t.alloc(rows * w * 4))   # activation
        tmp = [t.alloc(rng.randint(1, 64) * KIB) for _ in range(rng.randint(2, 6))]  # small temporaries
        loss = t.alloc(4)
        grads = []
        for i in range(len(acts) - 1, 0, -1):    # backward: grads in, activations out
            g = t.alloc(rows * (widths[(i + 1) // 2] if i > 0 else widths[0]) * 4)
            t.free(acts[i])
            grads.append(g)
            if len(grads) > 2:
                t.free(grads.pop(0))
        t.free(acts[0])
        for g in grads:
            t.free(g)
        wgrads = [t.alloc(a * b * 4) for a, b in zip(widths, widths[1:])]
        for x in tmp:
            t.free(x)
        t.free(loss)
        for g in wgrads:
            t.free(g)
    t.free_all()
    return t


def fragmenting(seed=2):
    rng = random.Random(seed)
    t = Trace()
    pinned = []
    live = []
    for step in range(20000):
        r = rng.random()
        if r < 0.45 or not live:
            size = rng.choice([rng.randint(1, 512 * KIB), rng.randint(1 * MIB, 9 * MIB),
                               rng.randint(10 * MIB, 40 * MIB), rng.randint(512, 4 * KIB)])
            i = t.alloc(size)
            (pinned if rng.random() < 0.05 else live).append(i)
        elif r < 0.97:
            t.free(live.pop(rng.randrange(len(live))))
        elif pinned:
            t.free(pinned.pop(rng.randrange(len(pinned))))
        if len(live) > 120:
            t.free(live.pop(0))
    t.free_all()
    return t


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "bench", "traces")
    os.makedirs(out, exist_ok=True)
    for name, make in [("training_loop", training_loop), ("fragmenting", fragmenting)]:
        t = make()
        path = os.path.join(out, name + ".trace")
        with open(path, "w") as f:
            f.write(f"# {name}: written by scripts/make_alloc_traces.py (see its docstring)\n")
            f.write("\n".join(t.lines) + "\n")
        print(f"{path}: {len(t.lines)} events")


if __name__ == "__main__":
    main()
