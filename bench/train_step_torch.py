#!/usr/bin/env python3
"""PyTorch eager's side of the training-step benchmark (bench/libtorch/side_by_side_train_step):
MLP 1024-4096-1024-4096-10, GELU, float32 without TF32, batch 256, AdamW (its default, foreach,
and fused=True), cross-entropy. Each round queues --steps steps and times them with CUDA events;
medians of the rounds, ms/step. Run it on the same GPU as the C++ benchmark, right after it.

    python3 bench/train_step_torch.py [--batch 256] [--rounds 15] [--steps 20]
"""
import argparse
import statistics

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    sizes = [1024, 4096, 1024, 4096, 10]
    print(f"train_step_torch: PyTorch {torch.__version__}, {torch.cuda.get_device_name()}, batch {args.batch}")
    for variant in ("default", "fused"):
        layers = []
        for i in range(len(sizes) - 1):
            layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
            if i + 2 < len(sizes):
                layers.append(torch.nn.GELU())
        model = torch.nn.Sequential(*layers).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=(variant == "fused"))
        x = torch.randn(args.batch, sizes[0], device="cuda")
        y = torch.randint(0, sizes[-1], (args.batch,), device="cuda")

        def step():
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        for _ in range(5):
            step()
        times = []
        for _ in range(args.rounds):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(args.steps):
                step()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / args.steps)
        ms = statistics.median(times)
        print(f"RESULT train_step_pytorch_{variant}_ms {ms:.4f}")


if __name__ == "__main__":
    main()
