"""``python -m skdptest``: the ``skdptest`` command line (see :mod:`skdptest.cli`).

``python -m skdptest demo`` runs the demo (also the ``skdptest-demo`` console script);
``mmd``, ``hsic`` and ``evalue`` run a private test on a CSV file.
"""

from __future__ import annotations

from .cli import AB_TEST, demo, demo_main, main, simulate

__all__ = ["AB_TEST", "demo", "demo_main", "main", "simulate"]

if __name__ == "__main__":
    raise SystemExit(main())
