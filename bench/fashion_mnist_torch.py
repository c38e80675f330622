#!/usr/bin/env python3
"""PyTorch's side of the issue-14 Fashion-MNIST benchmark: the fixed recipe that
examples/train_fashion_mnist.cpp runs in Kiln, written as a PyTorch user would.

Recipe: MLP 784-256-128-10 with GELU (exact, erf), cross-entropy, AdamW lr 1e-3 (PyTorch's
defaults otherwise: betas 0.9/0.999, eps 1e-8, weight decay 0.01), batch 256, 15 epochs, a
new shuffle every epoch, the last smaller batch kept (235 steps per epoch), fp32 without TF32,
the whole data set on the GPU. Each epoch gathers the training set into its shuffled order
once (x[perm], one gather per tensor) and takes the batches as contiguous slices of it, as
Kiln's DataLoader does (examples/data/data_loader.h).

Data: the four IDX .gz files read with gzip + numpy (magic numbers, dims, sizes and labels
checked), pixels -> float32 through the same 256-entry table as Kiln
(examples/data/fashion_mnist.cpp): (p / 255 - 0.2860) / 0.3530 computed in float64 and
rounded once to float32, so both frameworks train on bit-identical inputs. 0.2860 and 0.3530
are the training set's pixel mean and std (0.28604, 0.35302) rounded to 4 places.

Timing: train_s is the sum over epochs of the training loop alone (the epoch's shuffle,
forward, backward and optimizer steps), with the device synchronised before the clock starts
and before it stops; loading the files, building the model and the per-epoch test
evaluation are outside it. The first epoch includes PyTorch's first-call costs (cuBLAS
handle, kernel loading), as Kiln's includes its own.

Output: one line per epoch, then one greppable line:
    RESULT framework=pytorch seed=0 acc=0.8901 train_s=12.34 epochs=15 batch=256 lr=0.001 device=cuda torch=2.5.1

    python3 bench/fashion_mnist_torch.py --seed 0 [--data DIR] [--epochs 15] [--batch 256] [--lr 1e-3] [--device cuda]
"""
import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530
SYSTEM_DIR = "/usr/share/datasets/fashion-mnist"
STAGED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "fashion-mnist")
FILES = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
         "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}


def read_idx_ubyte(path, rank):
    """The unsigned-byte IDX array of `rank` dims in the gzip file at `path`."""
    if not os.path.isfile(path):
        sys.exit(f"fashion_mnist_torch: {path} is missing (apt-get install dataset-fashion-mnist)")
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:
        sys.exit(f"fashion_mnist_torch: {path} is not valid gzip: {e}")
    want = 0x0800 | rank
    if len(raw) < 4 + 4 * rank:
        sys.exit(f"fashion_mnist_torch: {path} is cut short ({len(raw)} bytes)")
    magic = struct.unpack(">I", raw[:4])[0]
    if magic != want:
        sys.exit(f"fashion_mnist_torch: {path} has magic 0x{magic:08x}, expected 0x{want:08x}")
    dims = struct.unpack(f">{rank}I", raw[4:4 + 4 * rank])
    size = int(np.prod(dims, dtype=np.int64))
    if len(raw) - 4 - 4 * rank != size:
        sys.exit(f"fashion_mnist_torch: {path} holds {len(raw) - 4 - 4 * rank} bytes of data, dims {dims} need {size}")
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def load(data_dir, split, device):
    """(images float32 [N, 784], labels int64 [N]) on `device`."""
    images = read_idx_ubyte(os.path.join(data_dir, FILES[split][0]), 3)
    labels = read_idx_ubyte(os.path.join(data_dir, FILES[split][1]), 1)
    if images.shape[1:] != (28, 28) or images.shape[0] != labels.shape[0] or labels.max() > 9:
        sys.exit(f"fashion_mnist_torch: {data_dir}: {split} images {images.shape} and labels {labels.shape} "
                 f"(max {labels.max()}) do not fit together")
    table = ((np.arange(256, dtype=np.float64) / 255.0 - MEAN) / STD).astype(np.float32)
    x = torch.from_numpy(table[images.reshape(-1, 784)]).to(device)
    y = torch.from_numpy(labels.astype(np.int64)).to(device)
    return x, y


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None, help="directory with the four .gz files")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    data_dir = args.data or next((d for d in (STAGED_DIR, SYSTEM_DIR)
                                  if os.path.isfile(os.path.join(d, FILES["test"][1]))), SYSTEM_DIR)
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    x_train, y_train = load(data_dir, "train", device)
    x_test, y_test = load(data_dir, "test", device)
    n = x_train.shape[0]
    steps = (n + args.batch - 1) // args.batch
    print(f"fashion_mnist_torch: {n} training / {x_test.shape[0]} test images from {os.path.normpath(data_dir)}, "
          f"{steps} steps of {args.batch} per epoch, device {device}, PyTorch {torch.__version__}", flush=True)

    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.GELU(), torch.nn.Linear(256, 128),
                                torch.nn.GELU(), torch.nn.Linear(128, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    shuffle = torch.Generator(device=device)
    shuffle.manual_seed(args.seed)

    train_s = 0.0
    acc = 0.0
    for epoch in range(1, args.epochs + 1):
        model.train()
        synchronize(device)
        start = time.perf_counter()
        perm = torch.randperm(n, device=device, generator=shuffle)
        xs, ys = x_train[perm], y_train[perm]
        loss_sum = torch.zeros((), device=device)
        for i in range(0, n, args.batch):
            xb, yb = xs[i:i + args.batch], ys[i:i + args.batch]
            loss = F.cross_entropy(model(xb), yb)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            loss_sum += loss.detach() * xb.shape[0]
        synchronize(device)
        epoch_s = time.perf_counter() - start
        train_s += epoch_s

        model.eval()
        with torch.no_grad():
            acc = (model(x_test).argmax(1) == y_test).float().mean().item()
        print(f"epoch {epoch}/{args.epochs} train_loss {loss_sum.item() / n:.4f} test_acc {acc:.4f} "
              f"epoch_s {epoch_s:.3f}", flush=True)

    print(f"RESULT framework=pytorch seed={args.seed} acc={acc:.4f} train_s={train_s:.2f} epochs={args.epochs} "
          f"batch={args.batch} lr={args.lr:g} device={device.type} torch={torch.__version__}", flush=True)


if __name__ == "__main__":
    main()
