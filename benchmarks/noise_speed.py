"""Throughput of the exact discrete Laplace sampler next to numpy's float Laplace sampler.

Prints draws per second for sizes 10^3, 10^5, 10^6 at rates 0.01, 1 and 10 (the rate of
the exact sampler is quantised onto multiples of 2**-20 first). numpy's ``rng.laplace``
(scale 1/rate) is shown for comparison only: it is a float inversion, not exact.

Run: ``python benchmarks/noise_speed.py``.
"""

import time

import numpy as np

from skdptest._noise import discrete_laplace, quantise_rate


def _rate_per_second(fn, size, min_time=0.2):
    """Draws per second of ``fn(size)``, repeated until ``min_time`` seconds have passed."""
    calls, start = 0, time.perf_counter()
    while True:
        fn(size)
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return calls * size / elapsed


def main():
    rng = np.random.default_rng(0)
    print(f"{'rate':>6} {'size':>9} {'exact draws/s':>15} {'numpy laplace/s':>16}")
    for rate in (0.01, 1.0, 10.0):
        q = quantise_rate(rate)
        for size in (10**3, 10**5, 10**6):
            exact = _rate_per_second(lambda n, q=q: discrete_laplace(rng, q, size=n), size)
            ref = _rate_per_second(lambda n, q=q: rng.laplace(0.0, 1.0 / q, size=n), size)
            print(f"{rate:>6g} {size:>9d} {exact:>15.3g} {ref:>16.3g}")


if __name__ == "__main__":
    main()
