#!/usr/bin/env python3
"""Independent reference for examples/data's epoch_permutation: std::seed_seq, std::mt19937_64
and the rejection-sampled Fisher-Yates of data_loader.cpp, transcribed from the C++ standard's
text ([rand.util.seedseq], [rand.eng.mers]); the engine is checked against the standard's
required 10000th output of a default-constructed mt19937_64. Prints the orders that
tests/examples/test_data_loader.cpp pins.

    python3 tests/examples/epoch_permutation_ref.py
"""
M32 = (1 << 32) - 1; M64 = (1 << 64) - 1

def seed_seq_generate(v, n):
    b = [0x8b8b8b8b] * n
    s = len(v)
    t = 11 if n >= 623 else 7 if n >= 68 else 5 if n >= 39 else 3 if n >= 7 else (n - 1) // 2
    p = (n - t) // 2; q = p + t
    m = max(s + 1, n)
    T = lambda x: x ^ (x >> 27)
    for k in range(m):
        r1 = (1664525 * T(b[k % n] ^ b[(k + p) % n] ^ b[(k - 1) % n])) & M32
        r2 = (r1 + (s if k == 0 else (k % n + v[k - 1]) if k <= s else k % n)) & M32
        b[(k + p) % n] = (b[(k + p) % n] + r1) & M32
        b[(k + q) % n] = (b[(k + q) % n] + r2) & M32
        b[k % n] = r2
    for k in range(m, m + n):
        r3 = (1566083941 * T((b[k % n] + b[(k + p) % n] + b[(k - 1) % n]) & M32)) & M32
        r4 = (r3 - k % n) & M32
        b[(k + p) % n] ^= r3
        b[(k + q) % n] ^= r4
        b[k % n] = r4
    return b

class MT64:
    n, m = 312, 156
    def __init__(self, state):
        self.x = state; self.i = self.n
    @classmethod
    def from_int(cls, seed):
        x = [seed & M64]
        for i in range(1, 312):
            x.append((6364136223846793005 * (x[-1] ^ (x[-1] >> 62)) + i) & M64)
        return cls(x)
    @classmethod
    def from_seq(cls, v):
        a = seed_seq_generate(v, 624)
        x = [(a[2 * i] + (a[2 * i + 1] << 32)) & M64 for i in range(312)]
        return cls(x)
    def __call__(self):
        if self.i >= self.n:
            x = self.x
            for k in range(self.n):
                y = (x[k] & ~((1 << 31) - 1) & M64) | (x[(k + 1) % self.n] & ((1 << 31) - 1))
                x[k] = x[(k + self.m) % self.n] ^ (y >> 1) ^ (0xB5026F5AA96619E9 if y & 1 else 0)
            self.i = 0
        z = self.x[self.i]; self.i += 1
        z ^= (z >> 29) & 0x5555555555555555
        z ^= (z << 17) & 0x71D67FFFEDA60000
        z ^= (z << 37) & 0xFFF7EEE000000000
        z ^= z >> 43
        return z & M64

g = MT64.from_int(5489)
for _ in range(9999): g()
assert g() == 9981545732273789042, "mt19937_64 check"

def perm(n, seed, epoch):
    g = MT64.from_seq([seed & M32, seed >> 32, epoch & M32, epoch >> 32])
    o = list(range(n))
    for i in range(n - 1, 0, -1):
        bound = i + 1
        thr = ((1 << 64) - bound) % bound
        while True:
            r = g()
            if r >= thr: break
        j = r % bound
        o[i], o[j] = o[j], o[i]
    return o

print(perm(8, 42, 1))
print(perm(10, 0, 0))
print(perm(12, (1 << 40) + 5, (1 << 33) + 2))
