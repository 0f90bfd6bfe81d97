"""Releases of 85 e-value configurations, to compare two versions of skdptest bit for bit.

Run it under each version and compare the two files::

    PYTHONPATH=/path/to/old python benchmarks/evalue_identity.py old.json
    python benchmarks/evalue_identity.py new.json
    python benchmarks/evalue_identity.py --compare old.json new.json

Each entry is the ``repr`` of a fitted result (every field, floats to the last bit) for
a fixed seed: Gaussian laws at n = 1 to 10^6 (float32, int, 1-D and extreme rows),
multivariate normals (C and Fortran order), the default laws, a correlated normal, Monte
Carlo tsLR, t, exponential, Poisson, binomial, the exact statistics, ε from 0.01 to 1000,
dask input, ``PrivateEProcess`` one- and two-sided, and ``expected_log_e_value``. Used
for the fused release and value-keyed plans (``benchmarks/results/evalue_speed.txt``):
all 85 equal to the previous commit. About 1.5 CPU minutes.
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
from scipy import stats

from skdptest import PrivateEProcess, PrivateEValueTest, expected_log_e_value


def releases():
    """{configuration: repr of its fitted result}."""
    out = {}

    def rec(name, est, X):
        out[name] = repr(est.fit(X).result_)

    rng = np.random.default_rng(1)
    g = rng.normal(0.3, 1.0, size=(3 * 16384 + 5, 1))
    for n in (1, 10, 1000, g.shape[0]):
        for eps in (0.5, 1.0, 3.0):
            for st in ("optimal", "tslr"):
                for bet in ("auto", 0.5):
                    rec(
                        f"norm n={n} eps={eps} {st} {bet}",
                        PrivateEValueTest(
                            stats.norm(0, 1),
                            stats.norm(0.5, 1),
                            epsilon=eps,
                            statistic=st,
                            bet=bet,
                            random_state=n,
                        ),
                        g[:n],
                    )
    big = rng.normal(0.2, 1.0, size=(10**6, 1))
    rec("norm 1e6", PrivateEValueTest(stats.norm(0, 1), stats.norm(0.5, 1), random_state=3), big)
    rec(
        "norm 1e6 f32",
        PrivateEValueTest(stats.norm(0, 1), stats.norm(0.5, 1), random_state=3),
        big.astype(np.float32),
    )
    rec(
        "norm int",
        PrivateEValueTest(stats.norm(0, 1), stats.norm(0.5, 1), random_state=3),
        rng.integers(-3, 4, size=(70000, 1)),
    )
    rec(
        "norm loc",
        PrivateEValueTest(stats.norm(1e6, 2), stats.norm(1e6 + 1, 2), random_state=3),
        rng.normal(1e6, 2, size=(20000, 1)),
    )
    rec(
        "norm 1d",
        PrivateEValueTest(stats.norm(0, 1), stats.norm(0.5, 1), random_state=3),
        big[:5000, 0],
    )
    for d in (2, 3, 7):
        mu = np.linspace(0, 0.4, d)
        X = rng.normal(size=(40000, d))
        for order in ("C", "F"):
            rec(
                f"mvn d={d} {order}",
                PrivateEValueTest(
                    stats.multivariate_normal(np.zeros(d), np.eye(d)),
                    stats.multivariate_normal(mu, np.eye(d)),
                    random_state=d,
                ),
                np.asarray(X, order=order),
            )
        rec(f"default d={d}", PrivateEValueTest(random_state=d), X)
    cov = np.array([[1, 0.3], [0.3, 2]])
    X = rng.multivariate_normal([0, 0], cov, size=30000)
    rec(
        "mvn corr",
        PrivateEValueTest(
            stats.multivariate_normal([0, 0], cov),
            stats.multivariate_normal([0.3, 0.1], cov),
            random_state=5,
        ),
        X,
    )
    rec(
        "mvn MC tslr",
        PrivateEValueTest(
            stats.multivariate_normal([0, 0], np.eye(2)),
            stats.multivariate_normal([0.3, 0.1], cov),
            statistic="tslr",
            random_state=5,
        ),
        X,
    )
    T = stats.t(3).rvs(size=(70000, 1), random_state=2)
    for st in ("optimal", "tslr"):
        rec(
            f"t {st}",
            PrivateEValueTest(stats.t(3), stats.t(3, loc=0.5), statistic=st, random_state=2),
            T,
        )
        rec(
            f"t small {st}",
            PrivateEValueTest(stats.t(3), stats.t(3, loc=0.5), statistic=st, random_state=2),
            T[:50],
        )
    E = stats.expon().rvs(size=(20000, 1), random_state=2)
    rec("expon", PrivateEValueTest(stats.expon(), stats.expon(scale=1.5), random_state=2), E)
    P = stats.poisson(3).rvs(size=(70000, 1), random_state=4)
    rec(
        "poisson tslr",
        PrivateEValueTest(stats.poisson(3), stats.poisson(3.5), statistic="tslr", random_state=4),
        P,
    )
    B = stats.binom(20, 0.3).rvs(size=(5000, 1), random_state=4)
    rec("binom", PrivateEValueTest(stats.binom(20, 0.3), stats.binom(20, 0.4), random_state=4), B)
    rec(
        "bern exact",
        PrivateEValueTest(
            stats.bernoulli(0.3), stats.bernoulli(0.5), statistic="exact", random_state=4
        ),
        rng.binomial(1, 0.4, size=(300, 1)),
    )
    rec(
        "norm exact",
        PrivateEValueTest(stats.norm(0, 1), stats.norm(0.5, 1), statistic="exact", random_state=4),
        g[:200],
    )
    rec(
        "norm eps big",
        PrivateEValueTest(stats.norm(0, 1), stats.norm(0.5, 1), epsilon=1000.0, random_state=4),
        g[:2000],
    )
    rec(
        "norm eps small",
        PrivateEValueTest(stats.norm(0, 1), stats.norm(0.5, 1), epsilon=0.01, random_state=4),
        g[:2000],
    )
    rec(
        "norm P=Q", PrivateEValueTest(stats.norm(0, 1), stats.norm(0, 1), random_state=4), g[:2000]
    )
    rec(
        "norm extreme rows",
        PrivateEValueTest(stats.norm(0, 1), stats.norm(0.5, 1), random_state=4),
        np.array([[1e308], [-1e308], [0.0], [-0.0], [5e-324], [-5e-324]] * 100),
    )
    try:
        import dask.array as da

        rec(
            "norm dask",
            PrivateEValueTest(stats.norm(0, 1), stats.norm(0.5, 1), random_state=4),
            da.from_array(g, chunks=(10000, 1)),
        )
    except ImportError:
        pass
    for two in (None, 0.05):
        for st in ("auto", "tslr", "exact"):
            rec(
                f"eprocess {two} {st}",
                PrivateEProcess(
                    stats.norm(0, 1), stats.norm(0.5, 1), beta=two, statistic=st, random_state=7
                ),
                g[:3000],
            )
    out["elog"] = repr(
        [expected_log_e_value(stats.norm(0, 1), stats.norm(0.5, 1), n, 1.0) for n in (10, 1000)]
        + [
            expected_log_e_value(
                stats.bernoulli(0.3), stats.bernoulli(0.5), 100, 1.0, statistic="exact"
            )
        ]
    )
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", nargs="?", help="JSON file to write")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"))
    args = parser.parse_args(argv)
    if args.compare:
        a, b = (json.load(open(f)) for f in args.compare)
        differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        print(f"{len(a)} and {len(b)} configurations; differ: {differ or 'none'}")
        return
    warnings.simplefilter("ignore")  # fixed seeds: FixedRandomStateWarning
    out = releases()
    with open(args.output, "w") as f:
        json.dump(out, f, indent=0)
    print(len(out), "configurations")


if __name__ == "__main__":
    main()
