#!/usr/bin/env python3
"""Safetensors interop between Kiln and PyTorch, both ways (issue 14, part 3).

1. PyTorch -> Kiln: PyTorch writes the weights of a seeded MLP (nn.Sequential of Linear and
   GELU) and its inputs and outputs; Kiln (tests/interop/safetensors_interop.cpp) loads the
   weights strictly into an nn::MLP, runs the forward, and saves its output, which this
   script compares with PyTorch's: float32 at torch.testing's float32 tolerance, and the same
   float32 weights loaded into a float64 Kiln model against PyTorch in float64 at 1e-10.
2. Kiln -> PyTorch: Kiln saves a seeded MLP's weights and its outputs; PyTorch loads the
   weights strictly into the same nn.Sequential and must reproduce Kiln's outputs.
3. Every dtype (F32 F64 F16 BF16 I64 I32 BOOL, NaN, infinities, -0.0, 0-dim and empty
   tensors, metadata): PyTorch writes, Kiln loads and re-saves, PyTorch reads Kiln's file and
   compares bit for bit.
Steps 1 and 3 run on Kiln's CPU, and on its GPU too when Kiln sees one.

Files are read and written with the `safetensors` package when it is importable (the
reference implementation, whose reader checks the format strictly), else with torch, json and
struct here (a writer laid out as the reference's, and a reader that checks what the
reference checks). The last line is "safetensors_interop: PASS" or "safetensors_interop: FAIL".

  python3 scripts/safetensors_interop.py --kiln build/tests/safetensors_interop [--dir DIR]
"""
import argparse
import copy
import json
import os
import struct
import subprocess
import sys
import tempfile

import torch

try:
    import safetensors.torch as st  # the reference implementation
except ImportError:
    st = None

CODES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.bool: "BOOL",
}
DTYPES = {v: k for k, v in CODES.items()}


def tensor_bytes(t):
    t = t.detach().cpu().contiguous().reshape(-1)
    if t.numel() == 0:
        return b""
    return bytes(t.view(torch.uint8).tolist())


def write_file(path, tensors, metadata=None):
    """Writes `tensors` (name -> tensor) as a safetensors file."""
    if st is not None:
        st.save_file({k: v.contiguous() for k, v in tensors.items()}, path, metadata=metadata)
        return
    # Laid out as the reference writer does: larger dtypes first, then by name.
    order = sorted(tensors, key=lambda k: (-tensors[k].element_size(), k))
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name in order:
        t = tensors[name]
        b = tensor_bytes(t)
        header[name] = {"dtype": CODES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_file(path):
    """Reads a safetensors file: (name -> tensor, metadata), checking the format strictly."""
    if st is not None:
        with st.safe_open(path, framework="pt") as f:
            metadata = f.metadata() or {}
        return st.load_file(path), metadata
    with open(path, "rb") as f:
        raw = f.read()
    assert len(raw) >= 8, f"{path}: shorter than 8 bytes"
    (n,) = struct.unpack("<Q", raw[:8])
    assert 8 + n <= len(raw), f"{path}: header length {n} past the end"
    text = raw[8:8 + n]
    assert text[:1] == b"{", f"{path}: header does not start with '{{'"

    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        assert len(keys) == len(set(keys)), f"{path}: duplicate keys {keys}"
        return dict(pairs)

    header = json.loads(text.decode("utf-8"), object_pairs_hook=no_duplicates)
    metadata = header.pop("__metadata__", {}) or {}
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()), "metadata must be strings"
    data = raw[8 + n:]
    tensors, at = {}, 0
    for name, e in sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"])):
        begin, end = e["data_offsets"]
        assert begin == at, f"{path}: {name} begins at {begin}, expected {at} (overlap or hole)"
        dtype, shape = DTYPES[e["dtype"]], e["shape"]
        numel = 1
        for s in shape:
            numel *= s
        assert end - begin == numel * torch.empty((), dtype=dtype).element_size(), f"{path}: {name} byte count"
        if numel == 0:
            t = torch.empty(shape, dtype=dtype)
        else:
            t = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype).reshape(shape)
        tensors[name] = t
        at = end
    assert at == len(data), f"{path}: {len(data) - at} bytes after the last tensor"
    return tensors, metadata


def mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(torch.nn.GELU())
    return torch.nn.Sequential(*layers)


class Checks:
    def __init__(self):
        self.failed = 0
        self.passed = 0

    def close(self, what, got, want, rtol, atol):
        got, want = got.detach().cpu(), want.detach().cpu()
        ok = got.shape == want.shape and got.dtype == want.dtype and torch.allclose(got, want, rtol=rtol, atol=atol)
        diff = (got.double() - want.double()).abs().max().item() if got.shape == want.shape and got.numel() else 0.0
        self.report(ok, f"{what}: max |diff| {diff:.3g} (rtol {rtol:g}, atol {atol:g})")

    def report(self, ok, line):
        print(f"  {'ok  ' if ok else 'FAIL'} {line}")
        if ok:
            self.passed += 1
        else:
            self.failed += 1


def run(cmd):
    print("  $ " + " ".join(cmd))
    done = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write("".join("    " + line + "\n" for line in (done.stdout + done.stderr).splitlines()))
    if done.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited with {done.returncode}")


def every_dtype():
    g = torch.Generator().manual_seed(3)
    special = torch.tensor([1.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-40, 6.5e4, -1.25], dtype=torch.float64)
    t = {
        "f64": torch.cat([special, torch.randn(12, generator=g, dtype=torch.float64)]).reshape(4, 5),
        "f32": torch.cat([special.float(), torch.randn(4, generator=g)]).reshape(3, 4),
        "f16": torch.cat([special.half(), torch.randn(4, generator=g).half()]),
        "bf16": torch.cat([special.bfloat16(), torch.randn(8, generator=g).bfloat16()]).reshape(2, 2, 4),
        "i64": torch.tensor([-(2 ** 63), 2 ** 63 - 1, -1, 0, 1, 123456789012345]).reshape(3, 2),
        "i32": torch.tensor([-(2 ** 31), 2 ** 31 - 1, -7], dtype=torch.int32),
        "bool": torch.rand(3, 3, generator=g) > 0.5,
        "scalar": torch.tensor(2.5),
        "empty": torch.empty(0, 3),
        "empty_i32": torch.empty(2, 0, dtype=torch.int32),
    }
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True, help="path to the safetensors_interop program")
    ap.add_argument("--dir", help="working directory (default: a fresh temporary one)")
    args = ap.parse_args()
    work = args.dir or tempfile.mkdtemp(prefix="kiln_safetensors_interop_")
    os.makedirs(work, exist_ok=True)
    kiln = args.kiln
    checks = Checks()
    print(f"safetensors_interop: torch {torch.__version__}, "
          f"{'safetensors ' + __import__('safetensors').__version__ if st else 'no safetensors package (own reader/writer)'}, "
          f"work dir {work}")
    try:
        has_cuda = subprocess.run([kiln, "has-cuda"], capture_output=True, text=True).stdout.strip() == "yes"
        devices = ["cpu", "cuda"] if has_cuda else ["cpu"]
        f32 = dict(rtol=1.3e-6, atol=1e-5)  # torch.testing.assert_close's float32 defaults
        f64 = dict(rtol=1e-10, atol=1e-12)

        print("1. PyTorch writes an MLP, Kiln loads it and runs the forward")
        torch.manual_seed(0)
        model = mlp([16, 32, 32, 8]).eval()
        x = torch.randn(5, 16)
        with torch.no_grad():
            y32 = model(x)
            y64 = copy.deepcopy(model).double()(x.double())
        weights = os.path.join(work, "torch_weights.safetensors")
        inputs = os.path.join(work, "torch_io.safetensors")
        write_file(weights, {k: v for k, v in model.state_dict().items()}, metadata={"format": "pt"})
        write_file(inputs, {"x": x})
        for device in devices:
            for dtype, want, tol in (("float32", y32, f32), ("float64", y64, f64)):
                out = os.path.join(work, f"kiln_y_{device}_{dtype}.safetensors")
                run([kiln, "forward", weights, inputs, out, "--device", device, "--dtype", dtype])
                got, meta = read_file(out)
                checks.report(meta.get("producer") == "kiln", f"metadata of Kiln's output: {meta}")
                checks.close(f"Kiln {device} {dtype} forward vs PyTorch", got["y"], want, **tol)

        print("2. Kiln writes an MLP, PyTorch loads it and runs the forward")
        run([kiln, "export", work, "--seed", "5"])
        kw, kmeta = read_file(os.path.join(work, "kiln_weights.safetensors"))
        checks.report(kmeta == {"format": "pt"}, f"metadata of Kiln's weights: {kmeta}")
        checks.report(list(kw) and sorted(kw) == sorted(model.state_dict()), f"keys: {sorted(kw)}")
        theirs = mlp([16, 32, 32, 8]).eval()
        theirs.load_state_dict(kw, strict=True)
        io, _ = read_file(os.path.join(work, "kiln_io.safetensors"))
        with torch.no_grad():
            checks.close("PyTorch forward of Kiln's weights vs Kiln (float32)", theirs(io["x"]), io["y"], **f32)
            checks.close("PyTorch forward of Kiln's weights vs Kiln (float64)", theirs.double()(io["x"].double()),
                         io["y64"], **f64)

        print("3. Every dtype: PyTorch writes, Kiln re-saves, PyTorch compares bit for bit")
        original = every_dtype()
        src = os.path.join(work, "torch_dtypes.safetensors")
        write_file(src, original, metadata={"format": "pt", "note": "ünïcödé"})
        for device in devices:
            dst = os.path.join(work, f"kiln_dtypes_{device}.safetensors")
            run([kiln, "resave", src, dst, "--device", device])
            back, meta = read_file(dst)
            checks.report(meta == {"format": "pt", "note": "ünïcödé"}, f"{device}: metadata {meta}")
            checks.report(sorted(back) == sorted(original), f"{device}: keys")
            for name, t in original.items():
                b = back.get(name)
                ok = b is not None and b.dtype == t.dtype and b.shape == t.shape and tensor_bytes(b) == tensor_bytes(t)
                checks.report(ok, f"{device}: {name} {CODES[t.dtype]} {list(t.shape)} bit for bit")
    except Exception as e:  # a crash of either side is a failure, reported as such
        checks.report(False, f"{type(e).__name__}: {e}")
    verdict = "PASS" if checks.failed == 0 else "FAIL"
    print(f"safetensors_interop: {verdict} ({checks.passed} checks passed, {checks.failed} failed)")
    return 0 if checks.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
