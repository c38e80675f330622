#!/usr/bin/env python3
"""Holds the per-kernel durations Kiln's profiler recorded (profiler_kernel_times --profile)
against Nsight Compute's gpu__time_duration.sum for the same launches (ncu --csv over
profiler_kernel_times --plain), for scripts/ncu_agreement.sh.

The i-th kernel of one list is the i-th of the other: both runs launch the same sequence.
The check first requires the lists to have the same length and the same kernel base name
(the function name without namespaces, template arguments or parameters) at every
position: the two demanglers format the rest differently (ncu writes `<unnamed>` for an
anonymous namespace, drops some namespaces, prints template values as numbers and cuts
parameter lists short).

The verdict is per kernel of the sequence: the program runs its op sequence `repeats`
times, so launch i is position i mod (n / repeats) of the sequence; each side's median
over the repeats of a position is compared, which keeps one launch that caught a clock
change from deciding. A position is checked when ncu's median is at least 10 us, and passes
when |Kiln / ncu - 1| <= 5%. Launch-by-launch ratios are printed as well, for reference.

    scripts/ncu_agreement.py KILN_TXT NCU_CSV

Prints a table and `RESULT ncu_agreement PASS n/m` (or FAIL); exit status 0 on PASS, 1 on
FAIL, 2 when an input cannot be read.
"""
import csv
import re
import statistics
import sys

MIN_NS = 10_000  # kernels shorter than 10 us are not checked
TOLERANCE = 0.05
UNIT_NS = {"nsecond": 1, "ns": 1, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}


def read_kiln(path):
    """[(ns, name)] in launch order and the repeat count from the header."""
    kernels, repeats = [], 1
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = re.match(r"# repeats (\d+)", line)
            if m:
                repeats = int(m.group(1))
            if not line or line.startswith("#"):
                continue
            parts = line.split(" ", 2)
            if len(parts) == 3 and parts[0].isdigit() and re.fullmatch(r"-?\d+", parts[1]):
                kernels.append((float(parts[1]), parts[2]))
    return kernels, repeats


def number(text):
    """A CSV value as a float: thousands separators and spaces dropped."""
    return float(text.replace(",", "").replace(" ", ""))


def read_ncu(path):
    """[(ns, name)] in profiling order from ncu's CSV (details page, or raw page)."""
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    # ncu's own messages (==PROF==, warnings) may precede the CSV: start at its header.
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(lines[start:]))
    header = rows[0]
    col = {name: i for i, name in enumerate(header)}
    kernels = []
    if "Metric Name" in col:  # details page: one row per (kernel, metric)
        for r in rows[1:]:
            if len(r) == len(header) and r[col["Metric Name"]] == "gpu__time_duration.sum":
                scale = UNIT_NS.get(r[col["Metric Unit"]].strip(), 1)
                kernels.append((int(number(r[col["ID"]])), number(r[col["Metric Value"]]) * scale, r[col["Kernel Name"]]))
    elif "gpu__time_duration.sum" in col:  # raw page: one column per metric, a row of units first
        c = col["gpu__time_duration.sum"]
        units = rows[1] if len(rows) > 1 else []
        scale = UNIT_NS.get(units[c].strip(), 1) if len(units) > c else 1
        for r in rows[1:]:
            if len(r) == len(header) and r[col["ID"]].strip().isdigit():
                kernels.append((int(r[col["ID"]]), number(r[c]) * scale, r[col["Kernel Name"]]))
    kernels.sort(key=lambda k: k[0])
    return [(ns, name) for _, ns, name in kernels]


def strip_params(name):
    """The name without its return type and parameter list: 'void a::f<int>(int*)' -> 'a::f<int>'."""
    # ncu's demangler writes an anonymous namespace as <unnamed>, the C++ runtime's as
    # (anonymous namespace); ncu also drops some namespaces and writes template values as numbers.
    s = name.replace("(anonymous namespace)", "{anon}").replace("<unnamed>", "{anon}").strip()
    depth = 0
    for i, ch in enumerate(s):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            s = s[:i].strip()
            break
    depth, last = 0, -1
    for i, ch in enumerate(s):  # a return type ends at the last space outside template arguments
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == " " and depth == 0:
            last = i
    return s[last + 1:].strip()


def base_name(name):
    """The function's own name: no namespaces, template arguments or parameters."""
    s = strip_params(name)
    cut = s.find("<")
    if cut >= 0:
        s = s[:cut]
    return s.split("::")[-1].strip()


def short(name, width=56):
    """A display form of a kernel name, cut to `width` characters."""
    s = re.sub(r"(\{anon\}|\b[A-Za-z_]\w*)::", "", strip_params(name))  # no namespaces
    return s if len(s) <= width else s[: width - 3] + "..."


def verdict(kiln_ns, ncu_ns):
    """'PASS', 'FAIL' or 'skip' (shorter than 10 us by ncu's figure)."""
    if ncu_ns < MIN_NS:
        return "skip"
    return "PASS" if abs(kiln_ns / ncu_ns - 1) <= TOLERANCE else "FAIL"


def ratio(kiln_ns, ncu_ns):
    return kiln_ns / ncu_ns if ncu_ns > 0 else float("inf")


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    kiln, repeats = read_kiln(argv[1])
    ncu = read_ncu(argv[2])
    print(f"ncu_agreement: Kiln {len(kiln)} kernels ({argv[1]}), ncu {len(ncu)} kernels ({argv[2]}), {repeats} repeats")
    if not kiln or not ncu:
        print("no kernels on one side: nothing to compare")
        print("RESULT ncu_agreement FAIL 0/0")
        return 2
    if len(kiln) != len(ncu):
        print(f"the two runs launched different numbers of kernels: Kiln {len(kiln)}, ncu {len(ncu)}")
    mismatch = [i for i in range(min(len(kiln), len(ncu))) if base_name(kiln[i][1]) != base_name(ncu[i][1])]
    for i in mismatch[:5]:
        print(f"  launch {i}: Kiln '{short(kiln[i][1])}' vs ncu '{short(ncu[i][1])}'")
    if len(kiln) != len(ncu) or mismatch:
        if mismatch:
            print(f"{len(mismatch)} launches name different kernels on the two sides")
        print("RESULT ncu_agreement FAIL 0/0")
        return 1

    print(f"\nlaunch by launch (checked from {MIN_NS / 1e3:.0f} us, tolerance {100 * TOLERANCE:.0f}%)")
    print(f"{'#':>4}  {'kernel':<56} {'Kiln us':>10} {'ncu us':>10} {'ratio':>7}  verdict")
    launch_pass = launch_checked = 0
    for i, ((kn, name), (nn, _)) in enumerate(zip(kiln, ncu)):
        v = verdict(kn, nn)
        launch_checked += v != "skip"
        launch_pass += v == "PASS"
        print(f"{i:>4}  {short(name):<56} {kn / 1e3:>10.2f} {nn / 1e3:>10.2f} {ratio(kn, nn):>7.4f}  {v}")
    print(f"launch by launch: {launch_pass}/{launch_checked} checked launches within {100 * TOLERANCE:.0f}%")

    # Per position of the sequence, medians over the repeats (the verdict).
    per = len(kiln) // repeats if repeats > 0 and len(kiln) % repeats == 0 else 0
    consistent = per > 0 and all(
        base_name(kiln[i][1]) == base_name(kiln[i % per][1]) for i in range(len(kiln)))
    if not consistent:
        print(f"\nthe {len(kiln)} launches do not split into {repeats} identical repeats: verdict launch by launch")
        ok = launch_checked > 0 and launch_pass == launch_checked
        print(f"RESULT ncu_agreement {'PASS' if ok else 'FAIL'} {launch_pass}/{launch_checked}")
        return 0 if ok else 1
    print(f"\nper kernel of the sequence: median of {repeats} repeats (the verdict)")
    print(f"{'pos':>4}  {'kernel':<56} {'Kiln us':>10} {'ncu us':>10} {'ratio':>7}  verdict")
    passed = checked = 0
    worst = 1.0
    for p in range(per):
        kn = statistics.median(kiln[p + r * per][0] for r in range(repeats))
        nn = statistics.median(ncu[p + r * per][0] for r in range(repeats))
        v = verdict(kn, nn)
        checked += v != "skip"
        passed += v == "PASS"
        if v != "skip" and abs(ratio(kn, nn) - 1) > abs(worst - 1):
            worst = ratio(kn, nn)
        print(f"{p:>4}  {short(kiln[p][1]):<56} {kn / 1e3:>10.2f} {nn / 1e3:>10.2f} {ratio(kn, nn):>7.4f}  {v}")
    ok = checked > 0 and passed == checked
    print(f"{passed}/{checked} kernels of at least {MIN_NS / 1e3:.0f} us within {100 * TOLERANCE:.0f}% of ncu "
          f"(worst ratio {worst:.4f}); {per - checked} shorter ones skipped")
    print(f"RESULT ncu_agreement {'PASS' if ok else 'FAIL'} {passed}/{checked}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
