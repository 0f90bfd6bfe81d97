"""Power of the everyday private tests beside the public tests and the published anchors.

Runs the per-family scripts (``classical_power_<part>.py``, each writing
``results/classical_power_<part>.txt``) and gathers their tables into
``results/classical_power.txt``. The targets (issue 19: ε = 1, α = 0.05, 80 % power):

- two groups, d = 0.5, two-sided: <= 80 rows per group (published DP: |KW| 100, DP MW 160);
- three groups, effect 0.35: <= 123 rows per group (published DP |KW|);
- one-sample location, d = 0.4, symmetric null (signed-rank): <= 104 (test of tests: 200);
- mean on [-3, 3], d = 0.4, valid for every law on the bounds: <= 200 (best valid tried: 215);
- binomial: power equal to the exact UMP computation.

Usage::

    python benchmarks/classical_power.py            # run every part, then gather
    python benchmarks/classical_power.py --gather   # only gather the existing results
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
PARTS = ["binomial", "rank", "mean", "dist"]


def _run(part):
    script = HERE / f"classical_power_{part}.py"
    if not script.exists():
        return f"(no script {script.name})"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(script)], check=True, cwd=HERE.parent)
    return f"ran in {time.perf_counter() - t0:.0f} s"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gather", action="store_true", help="only gather the results")
    args = parser.parse_args(argv)
    sections = [__doc__.split("Usage::")[0].rstrip(), ""]
    for part in PARTS:
        status = "gathered" if args.gather else _run(part)
        path = RESULTS / f"classical_power_{part}.txt"
        body = path.read_text() if path.exists() else "(no results yet)\n"
        sections += [f"== {part} ({path.name}, {status})", body]
    text = "\n".join(sections)
    (RESULTS / "classical_power.txt").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
