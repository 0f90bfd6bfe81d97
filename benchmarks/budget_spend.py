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
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from skdptest import PrivacyBudget, _budget


def fill(budget, n_entries, epsilon=1e-6):
    """Append ``n_entries`` spends of ``epsilon`` in one transaction, as ``spend`` would."""
    con = budget._connect()
    try:
        con.execute("BEGIN IMMEDIATE")
        state = budget._read_state(con)
        head, rows, now, pid = state.head, [], time.time(), os.getpid()
        for entry_id in range(state.n_entries + 1, state.n_entries + n_entries + 1):
            head = _budget._link(head, entry_id, now, "fill", epsilon, 0.0, pid)
            rows.append((entry_id, now, "fill", epsilon, 0.0, pid, head))
        con.executemany("INSERT INTO spends VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        new = _budget._State(
            state.ledger_id,
            state.epsilon,
            state.delta,
            state.spent_epsilon + n_entries * _budget._to_units(epsilon),
            state.spent_delta,
            state.n_entries + n_entries,
            head,
        )
        con.execute(
            "UPDATE totals SET ledger_id = ?, epsilon = ?, delta = ?, spent_epsilon = ?, "
            "spent_delta = ?, n_entries = ?, head = ?, digest = ? WHERE id = 1",
            new.row(),
        )
        con.execute("COMMIT")
    finally:
        con.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    print(
        f"{'entries':>8} {'spend ms':>9} {'spend cpu ms':>13} {'spent ms':>9} "
        f"{'ledger ms':>10} {'reopen ms':>10}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for index, size in enumerate(args.sizes):
            path = os.path.join(tmp, f"ledger-{index}.sqlite")
            budget = PrivacyBudget(epsilon=1e9, path=path)
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
            PrivacyBudget(epsilon=1e9, path=path)
            t_reopen = time.perf_counter() - t0
            print(
                f"{size:>8} {1e3 * statistics.median(spend_times):>9.3f} "
                f"{1e3 * statistics.median(spend_cpu):>13.3f} "
                f"{1e3 * statistics.median(spent_times):>9.3f} {1e3 * t_ledger:>10.1f} "
                f"{1e3 * t_reopen:>10.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
