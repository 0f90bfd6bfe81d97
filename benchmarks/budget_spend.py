"""Time per ``PrivacyBudget.spend`` against the length of the ledger.

A spend reads and rewrites one totals row (running exact sums, entry count,
hash-chain head, digest), so its cost should not grow with the number of entries;
reading ``ledger`` and reopening a ledger by path verify every entry, so those
grow linearly. For each size the ledger is first filled in one transaction (the
same rows, chain and totals that ``spend`` writes), then ``--repeats`` spends are
timed one by one (each opens its connection and commits with SQLite's default
``synchronous=FULL``, so the wall time includes fsyncs of the journal and the
ledger file, which dominate it and vary with the disk) and the median wall time
and median CPU time (``time.process_time``: this process's own work, without the
waits for the disk) are printed.

Usage::

    python benchmarks/budget_spend.py                  # 10^2, 10^4, 10^5 entries
    python benchmarks/budget_spend.py --sizes 100 1000 --repeats 50
    python benchmarks/budget_spend.py --accountants zcdp   # one accountant
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from skdptest import PrivacyBudget


def fill(budget, n_entries, epsilon=1e-6):
    """Append ``n_entries`` spends of ``epsilon`` in one transaction, as ``spend`` would
    (the same rows, hash chain, running sums and digest: ``PrivacyBudget._record``)."""
    budget._record([(None, "fill", epsilon, 0.0, "pure")] * n_entries)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--accountants", nargs="+", default=["basic", "zcdp", "rdp"])
    args = parser.parse_args()
    print(
        f"{'accountant':>10} {'entries':>8} {'spend ms':>9} {'spend cpu ms':>13} {'spent ms':>9} "
        f"{'ledger ms':>10} {'reopen ms':>10}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for index, (accountant, size) in enumerate(
            (a, n) for a in args.accountants for n in args.sizes
        ):
            path = os.path.join(tmp, f"ledger-{index}.sqlite")
            budget = PrivacyBudget(epsilon=1e9, delta=1e-6, path=path, accountant=accountant)
            fill(budget, size)
            spend_times, spend_cpu, spent_times = [], [], []
            for _ in range(args.repeats):
                t0, c0 = time.perf_counter(), time.process_time()
                budget.spend(1e-6, label="timed")
                spend_times.append(time.perf_counter() - t0)
                spend_cpu.append(time.process_time() - c0)
                t0 = time.perf_counter()
                budget.spent  # noqa: B018
                spent_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            entries = budget.ledger
            t_ledger = time.perf_counter() - t0
            assert len(entries) == size + args.repeats
            t0 = time.perf_counter()
            PrivacyBudget(epsilon=1e9, delta=1e-6, path=path, accountant=accountant)
            t_reopen = time.perf_counter() - t0
            print(
                f"{accountant:>10} {size:>8} {1e3 * statistics.median(spend_times):>9.3f} "
                f"{1e3 * statistics.median(spend_cpu):>13.3f} "
                f"{1e3 * statistics.median(spent_times):>9.3f} {1e3 * t_ledger:>10.1f} "
                f"{1e3 * t_reopen:>10.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
