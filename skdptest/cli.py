"""The ``skdptest`` command-line tool (also ``python -m skdptest``).

Subcommands
-----------
``demo``
    A private A/B test on simulated data (nothing is read or downloaded).
``mmd``
    Two-sample (or k-sample) test (:class:`~skdptest.DPMMDTest`) of the columns
    ``--columns`` of a CSV file between the groups of ``--group-column``; ``--kernel``,
    ``--bandwidth`` (a number or ``median``) and ``--method`` choose the kernel route.
``hsic``
    Independence test (:class:`~skdptest.DPHSICTest`) between ``--x-columns`` and
    ``--y-columns`` (``--kernel``, ``--bandwidth``, ``--y-kernel``, ``--y-bandwidth``).
``proportion``
    Exact test of a proportion (:class:`~skdptest.DPBinomialTest`) of a 0/1 column.
``mannwhitney``, ``kruskal``, ``signedrank``
    Rank tests (:class:`~skdptest.DPMannWhitneyTest`, :class:`~skdptest.DPKruskalWallisTest`,
    :class:`~skdptest.DPWilcoxonTest`).
``chi2``, ``contingency``
    χ² goodness of fit on declared categories (:class:`~skdptest.DPChiSquareTest`) and
    independence of two declared categorical columns (:class:`~skdptest.DPContingencyTest`).
``evalue``
    Private e-value test (:class:`~skdptest.PrivateEValueTest`) of one column, simple null
    law vs simple alternative law, written as scipy.stats frozen laws
    (``"bernoulli(0.3)"``, ``"norm(loc=0, scale=2)"``).

Every test subcommand takes ``--epsilon`` and ``--alpha`` (and ``--n-permutations`` for
the kernel tests, ``--n-resamples`` for the Monte Carlo nulls), ``--seed`` (tests only: a
fixed seed lets anyone replay the noise),
``--ledger PATH`` (a persistent :class:`~skdptest.PrivacyBudget`, created with
``--budget-epsilon``) and ``--json`` (print the whole frozen result and the ledger's
totals as one JSON object).

Exit codes
----------
0 success; 2 usage error (bad option, bad law, a parameter the estimator refuses);
3 bad input (missing file or column, non-numeric or missing values, data the test
cannot use); 4 privacy budget exhausted (nothing was charged); 5 ledger error (missing,
damaged, foreign ledger file, or other totals than those it was created with).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import sqlite3
import sys
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

import skdptest
from skdptest import (
    BudgetExceededError,
    InvalidParameterError,
    LedgerError,
    PrivacyBudget,
)

__all__ = ["AB_TEST", "demo", "demo_main", "main", "parse_law", "simulate"]

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_BAD_INPUT = 3
EXIT_BUDGET = 4
EXIT_LEDGER = 5

_SEED_WARNING = (
    "warning: --seed fixes the noise; anyone who knows the seed can replay it and undo "
    "the privacy of the release. Use it for tests only, never for real data."
)


class _CliError(Exception):
    """A one-line failure reported on stderr with an exit code (no traceback)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


# -- the demo --------------------------------------------------------------------------

# A redesigned checkout page (variant B) is shown to 200 users. Historically 30 % of
# users convert; the redesign is worth shipping if it reaches 50 %. The simulation
# uses a true rate of 45 %. Variant A (old page) users are simulated for the
# two-sample and independence demos.
AB_TEST = {
    "baseline_rate": 0.30,  # H0: conversion rate of the old page (public, historical)
    "hoped_rate": 0.50,  # H1: the rate the redesign is hoped to reach
    "true_rate": 0.45,  # used only to simulate variant B
    "n_users": 200,  # per variant
    "minutes_mean": {"A": 3.0, "B": 3.6},  # time on page, log-normal medians (minutes)
    "minutes_sigma": 0.5,
    "seed": 2026,
}

#: ε of each release in the demo, and the total budget they are charged to.
EPSILON_PER_RELEASE = 1.0
TOTAL_EPSILON = 6.0


def simulate(params=AB_TEST):
    """Simulate the A/B data set: conversions of B, and log time on page of A and B.

    Parameters
    ----------
    params : dict, default=AB_TEST
        The simulation's parameters (see :data:`AB_TEST`).

    Returns
    -------
    converted_b : ndarray of shape (n_users, 1)
        0/1 conversions of the users who saw variant B.
    log_minutes : ndarray of shape (2 * n_users, 1)
        Log time on page, variant A then variant B.
    variant : ndarray of shape (2 * n_users,)
        ``"A"`` or ``"B"``.
    converted : ndarray of shape (2 * n_users,)
        0/1 conversions of all users (A at the baseline rate).
    """
    rng = np.random.default_rng(params["seed"])
    n = params["n_users"]
    converted_a = rng.binomial(1, params["baseline_rate"], size=n)
    converted_b = rng.binomial(1, params["true_rate"], size=n)
    log_minutes = np.concatenate(
        [
            np.log(params["minutes_mean"][v]) + params["minutes_sigma"] * rng.normal(size=n)
            for v in ("A", "B")
        ]
    )[:, None]
    variant = np.repeat(np.array(["A", "B"]), n)
    converted = np.concatenate([converted_a, converted_b])
    return converted_b[:, None].astype(float), log_minutes, variant, converted


def _print_ledger(budget):
    print("\nPrivacy ledger (basic sequential composition: the epsilons add up)")
    print(f"  {'#':>2}  {'release':<38} {'epsilon':>8} {'delta':>7}")
    for i, entry in enumerate(budget.ledger, 1):
        print(f"  {i:>2}  {entry.label:<38} {entry.epsilon:>8.3g} {entry.delta:>7.3g}")
    eps, delta = budget.spent
    left_eps, left_delta = budget.remaining
    print(f"  spent: epsilon={eps:.3g}, delta={delta:.3g}; "
          f"remaining: epsilon={left_eps:.3g}, delta={left_delta:.3g} "
          f"of epsilon={budget.epsilon:.3g}")


def demo():
    """Run the demo: print each private result and the ledger; return 0.

    The random seeds are fixed so that the demo prints the same numbers every time.
    That is for reproducibility only: a real release must use ``random_state=None``.
    """
    with warnings.catch_warnings():
        # Simulated data and fixed seeds on purpose: the demo prints the same numbers.
        warnings.simplefilter("ignore", skdptest.FixedRandomStateWarning)
        return _demo()


def _demo():
    params = AB_TEST
    converted_b, log_minutes, variant, converted = simulate(params)
    budget = PrivacyBudget(epsilon=TOTAL_EPSILON)
    eps = EPSILON_PER_RELEASE
    print(f"skdptest {skdptest.__version__} demo: a private A/B test on simulated data")
    print(f"{params['n_users']} users per variant; privacy budget epsilon={TOTAL_EPSILON:g}, "
          f"each release epsilon={eps:g} (replace-one neighbours)\n")

    # 1. Did variant B convert at the baseline rate (H0) or at the hoped rate (H1)?
    h0, h1 = stats.bernoulli(params["baseline_rate"]), stats.bernoulli(params["hoped_rate"])
    common = dict(epsilon=eps, alpha=0.05, budget=budget, random_state=0)
    result = skdptest.PrivateEValueTest(h0, h1, **common).test(converted_b)
    print(f"PrivateEValueTest: H0 rate {params['baseline_rate']:.2f} "
          f"vs H1 rate {params['hoped_rate']:.2f}")
    print(f"  e-value = {result.e_value:.4g} (log e-value {result.log_e_value:.3f} nats); "
          f"reject H0 at alpha={result.alpha:g} (e-value >= {1 / result.alpha:g}): "
          f"{result.reject}")

    # 2. The same question asked as the users arrive, 20 a day; the stream stops at the
    # first decision (two-sided: reject H0, or reject H1 and so accept H0).
    proc = skdptest.PrivateEProcess(h0, h1, beta=0.05, **common)
    days = 0
    for start in range(0, len(converted_b), 20):
        days += 1
        proc.partial_fit(converted_b[start:start + 20])
        if proc.result_.decision != "continue":
            break
    r = proc.result_
    print("PrivateEProcess: the same question, users streamed 20 a day")
    print(f"  decision after day {days}: {r.decision} "
          f"({r.n_samples} users used, e-value {r.e_value:.4g})")

    r = skdptest.DPMMDTest(
        epsilon=eps, n_permutations=500, budget=budget, random_state=0
    ).test(log_minutes, variant)
    print("DPMMDTest: is time on page distributed alike under A and B?")
    print(f"  p-value = {r.pvalue:.4g}; reject at alpha={r.alpha:g}: {r.reject}")

    # the default: all n - 1 cyclic shifts of one random order (no n_permutations)
    r = skdptest.DPHSICTest(
        epsilon=eps, budget=budget, random_state=0
    ).test(log_minutes, converted.astype(float))
    print("DPHSICTest: is conversion independent of time on page?")
    print(f"  p-value = {r.pvalue:.4g}; reject at alpha={r.alpha:g}: {r.reject}")

    gtm = skdptest.GeneralizedThresholdMechanism(
        epsilon=eps, budget=budget, random_state=0
    ).fit(np.exp(log_minutes))
    r = gtm.test()
    if r.accepted is None:
        print("GeneralizedThresholdMechanism: private median search found no grid point")
    else:
        c = gtm.mechanisms_[r.accepted].statistic.c
        print("GeneralizedThresholdMechanism: private search for the median time on page")
        print(f"  median <= {c:g} minutes (dyadic grid), after {r.n_examined} steps")

    _print_ledger(budget)
    return EXIT_OK


def demo_main(argv=None):
    """Entry point of the ``skdptest-demo`` console script (same as ``skdptest demo``)."""
    return main(["demo", *(sys.argv[1:] if argv is None else argv)])


# -- laws: a small safe grammar, never eval ---------------------------------------------

_NAME = r"[A-Za-z][A-Za-z0-9_]*"
# A decimal literal: digits, optional fraction, optional exponent (no inf, nan, hex).
_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_LAW = re.compile(rf"\s*({_NAME})\s*\((.*)\)\s*")
_POSITIONAL = re.compile(rf"\s*({_NUMBER})\s*")
_KEYWORD = re.compile(rf"\s*({_NAME})\s*=\s*({_NUMBER})\s*")
_MAX_LAW_LENGTH = 200


def _number(text):
    value = float(text)
    if re.fullmatch(r"[+-]?\d+", text):
        value = int(text)  # shape parameters such as binom's n must stay integers
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    return value


def parse_law(text):
    """Parse a scipy.stats frozen law written as ``name(arg, ..., key=value, ...)``.

    The grammar is deliberately tiny and nothing is evaluated: ``name`` must be a
    distribution of :mod:`scipy.stats` (e.g. ``norm``, ``bernoulli``, ``binom``) and every
    argument a decimal number, positional or ``keyword=number``.

    Parameters
    ----------
    text : str
        E.g. ``"bernoulli(0.3)"``, ``"norm(loc=0.5, scale=1)"``, ``"binom(10, 0.2)"``.

    Returns
    -------
    scipy.stats frozen distribution

    Raises
    ------
    ValueError
        If ``text`` is not in the grammar, names no scipy.stats distribution, or its
        parameters are invalid for that distribution.

    Examples
    --------
    >>> law = parse_law("binom(10, p=0.25)")
    >>> law.dist.name, law.args, law.kwds
    ('binom', (10,), {'p': 0.25})
    """
    if not isinstance(text, str):
        raise TypeError(f"a law must be given as a str, got {type(text).__name__}")
    if len(text) > _MAX_LAW_LENGTH:
        raise ValueError(f"law longer than {_MAX_LAW_LENGTH} characters")
    match = _LAW.fullmatch(text)
    if match is None:
        raise ValueError(
            f"{text!r} is not of the form name(number, ..., key=number, ...), "
            "e.g. bernoulli(0.3) or norm(loc=0, scale=1)"
        )
    name, inner = match.groups()
    dist = getattr(stats, name, None)
    if not isinstance(dist, (stats.rv_continuous, stats.rv_discrete)):
        raise ValueError(f"{name!r} is not a scipy.stats distribution")
    args, kwargs = [], {}
    for part in inner.split(",") if inner.strip() else []:
        if (m := _KEYWORD.fullmatch(part)) is not None:
            key, value = m.groups()
            if key in kwargs:
                raise ValueError(f"{text!r}: keyword {key!r} given twice")
            kwargs[key] = _number(value)
        elif (m := _POSITIONAL.fullmatch(part)) is not None:
            if kwargs:
                raise ValueError(f"{text!r}: positional argument after a keyword argument")
            args.append(_number(m.group(1)))
        else:
            raise ValueError(f"{text!r}: {part.strip()!r} is not a number or key=number")
    try:
        law = dist(*args, **kwargs)
        # Freezing checks nothing: scipy reports bad shapes as a NaN support.
        support = law.support()
    except TypeError as exc:  # a missing or unknown parameter
        raise ValueError(f"{text!r}: {exc}") from None
    if any(np.isnan(support)):
        raise ValueError(f"{text!r}: invalid parameters for scipy.stats.{name}")
    return law


def _law_type(text):
    try:
        return parse_law(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# -- argument types ---------------------------------------------------------------------


def _convert(text, kind, what):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None


def _positive_float(text):
    value = _convert(text, float, "a number")
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number > 0")
    return value


def _unit_float(text, closed_left=False):
    value = _convert(text, float, "a number")
    low_ok = value >= 0 if closed_left else value > 0
    if not (low_ok and value < 1):
        interval = "[0, 1)" if closed_left else "(0, 1)"
        raise argparse.ArgumentTypeError(f"{text!r} is not in {interval}")
    return value


def _delta_float(text):
    return _unit_float(text, closed_left=True)


def _int_at_least(text, low):
    value = _convert(text, int, "an integer")
    if value < low:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= {low}")
    return value


def _positive_int(text):
    return _int_at_least(text, 1)


def _seed(text):
    return _int_at_least(text, 0)


def _finite_float(text):
    value = _convert(text, float, "a number")
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _closed_unit_float(text):
    value = _convert(text, float, "a number")
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not in [0, 1]")
    return value


def _bandwidth(text):
    if text == "median":
        return text
    return _positive_float(text)


# -- the parser -------------------------------------------------------------------------


def _add_common(sub, permutations, resamples=False):
    sub.add_argument("--file", required=True, metavar="CSV",
                     help="CSV file with a header row (private data).")
    sub.add_argument("--epsilon", type=_positive_float, default=1.0,
                     help="ε charged by this release (default: 1).")
    sub.add_argument("--alpha", type=_unit_float, default=0.05,
                     help="level of the test, in (0, 1) (default: 0.05).")
    if permutations:
        sub.add_argument("--n-permutations", type=_positive_int, default=2000,
                         help="number of permutations (default: 2000).")
    if resamples:
        sub.add_argument("--n-resamples", type=_positive_int, default=None,
                         help="number of Monte Carlo draws of the null (default: the "
                              "test's own).")
    sub.add_argument("--seed", type=_seed, default=None,
                     help="fix the noise (tests and documentation ONLY: anyone who knows "
                          "the seed can replay the noise; leave it unset for real data).")
    sub.add_argument("--ledger", metavar="PATH", default=None,
                     help="persistent privacy ledger (a PrivacyBudget file) to charge.")
    sub.add_argument("--budget-epsilon", type=_positive_float, default=None,
                     help="total ε of the ledger: creates it if PATH does not exist, "
                          "and must match its totals otherwise.")
    sub.add_argument("--budget-delta", type=_delta_float, default=None,
                     help="total δ of the ledger, in [0, 1) (default: 0 when creating).")
    sub.add_argument("--json", action="store_true",
                     help="print the result (every field) and the ledger totals as JSON.")


def _parser():
    parser = argparse.ArgumentParser(
        prog="skdptest",
        description="Differentially private hypothesis tests on CSV files. Every release "
                    "is charged to the ledger given by --ledger.",
        epilog="exit codes: 0 ok, 2 usage error, 3 bad input, 4 budget exhausted, "
               "5 ledger error",
    )
    parser.add_argument("--version", action="version", version=skdptest.__version__)
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    subs.add_parser("demo", help="private A/B-test demo on simulated data (no download).",
                    description="Private A/B-test demo on simulated data (no download).")

    mmd = subs.add_parser("mmd", help="two-sample test (DPMMDTest) between two groups.",
                          description="Do the rows of the two groups of --group-column "
                                      "follow the same distribution? (DP kernel MMD)")
    mmd.add_argument("--columns", nargs="+", required=True, metavar="COL",
                     help="numeric columns compared between the groups.")
    mmd.add_argument("--group-column", required=True, metavar="COL",
                     help="column of group labels: two or more distinct values (with "
                          "more than two, the k-sample test of whether all groups follow "
                          "one distribution).")
    mmd.add_argument("--random-permutations", action="store_true",
                     help="random relabellings (--n-permutations of them) instead of the "
                          "default for the bandwidth aggregate from 1000 rows on: the n - 1 "
                          "cyclic shifts of one random order.")
    _add_kernel(mmd)
    _add_common(mmd, permutations=True)

    hsic = subs.add_parser("hsic", help="independence test (DPHSICTest).",
                           description="Are --x-columns independent of --y-columns? "
                                       "(DP kernel HSIC)")
    hsic.add_argument("--x-columns", nargs="+", required=True, metavar="COL")
    hsic.add_argument("--y-columns", nargs="+", required=True, metavar="COL")
    hsic.add_argument("--random-permutations", action="store_true",
                      help="random permutations (--n-permutations of them) instead of the "
                           "default n - 1 cyclic shifts of one random order.")
    _add_kernel(hsic)
    _add_kernel(hsic, prefix="y-")
    _add_common(hsic, permutations=True)

    evalue = subs.add_parser(
        "evalue", help="e-value test of a simple null law vs a simple alternative law.",
        description="Private e-value test (PrivateEValueTest) of one column. Laws are "
                    "scipy.stats distributions with numeric arguments, e.g. "
                    "'bernoulli(0.3)', 'norm(loc=0, scale=1)', 'binom(10, 0.2)'.",
    )
    evalue.add_argument("--column", required=True, metavar="COL")
    evalue.add_argument("--null", required=True, type=_law_type, metavar="LAW")
    evalue.add_argument("--alternative", required=True, type=_law_type, metavar="LAW")
    _add_common(evalue, permutations=False)
    subparsers = {"mmd": mmd, "hsic": hsic, "evalue": evalue}
    subparsers.update(_classical_parsers(subs))
    return parser, subparsers


def _add_kernel(sub, prefix=""):
    side = "Y's " if prefix else ""
    sub.add_argument(f"--{prefix}kernel", choices=("rbf", "laplacian"), default="rbf",
                     help=f"{side}kernel (bounded by 1, so no bound to declare; default: rbf).")
    sub.add_argument(f"--{prefix}bandwidth", type=_bandwidth, default=None, metavar="GAMMA",
                     help=f"{side}kernel's gamma, a number > 0 fixed in advance, or 'median' "
                          "(a private median heuristic, charged from --epsilon). Default: "
                          "several bandwidths aggregated in one test.")
    if not prefix:
        sub.add_argument("--method", choices=("exact", "features"), default="exact",
                         help="'exact' kernel matrix (default) or random features "
                              "(linear memory, for large files).")


def _add_alternative(sub):
    sub.add_argument("--alternative", choices=("two-sided", "greater", "less"),
                     default="two-sided", help="alternative hypothesis (default: two-sided).")


def _classical_parsers(subs):
    out = {}
    prop = subs.add_parser(
        "proportion", help="test of a proportion (DPBinomialTest) on a 0/1 column.",
        description="Is the proportion of 1s in --column equal to (or above, below) "
                    "--null-proportion? Exact private binomial test (Tulap noise).")
    prop.add_argument("--column", required=True, metavar="COL", help="column of 0/1 values.")
    prop.add_argument("--null-proportion", required=True, type=_closed_unit_float,
                      metavar="P", help="the proportion under the null, in [0, 1].")
    _add_alternative(prop)
    _add_common(prop, permutations=False)
    out["proportion"] = prop

    mw = subs.add_parser(
        "mannwhitney", help="two-group rank test (DPMannWhitneyTest).",
        description="Do the values of --column differ in location between the two groups "
                    "of --group-column? (private Mann-Whitney test; ties broken at random)")
    kw = subs.add_parser(
        "kruskal", help="k-group rank test (DPKruskalWallisTest).",
        description="Do the values of --column differ in location between the groups of "
                    "--group-column (two or more)? (private Kruskal-Wallis test)")
    for sub, groups in ((mw, "exactly two"), (kw, "two or more")):
        sub.add_argument("--column", required=True, metavar="COL", help="numeric column.")
        sub.add_argument("--group-column", required=True, metavar="COL",
                         help=f"column of group labels ({groups} distinct values; the group "
                              "sizes are public).")
        if sub is mw:
            _add_alternative(sub)
        _add_common(sub, permutations=False, resamples=True)
    out.update(mannwhitney=mw, kruskal=kw)

    sr = subs.add_parser(
        "signedrank", help="one-sample or paired signed-rank test (DPWilcoxonTest).",
        description="Is --column (or --column minus --paired-column) symmetric about "
                    "--center? (private Wilcoxon signed-rank test)")
    sr.add_argument("--column", required=True, metavar="COL", help="numeric column.")
    sr.add_argument("--paired-column", default=None, metavar="COL",
                    help="second measurement of the same rows: test the differences.")
    sr.add_argument("--center", type=_finite_float, default=0.0,
                    help="centre of symmetry under the null (default: 0).")
    _add_alternative(sr)
    _add_common(sr, permutations=False, resamples=True)
    out["signedrank"] = sr

    gof = subs.add_parser(
        "chi2", help="chi-squared goodness-of-fit test (DPChiSquareTest).",
        description="Do the categories of --column occur with the --probabilities given? "
                    "Categories are declared: a value outside them is refused.")
    gof.add_argument("--column", required=True, metavar="COL", help="column of labels.")
    gof.add_argument("--categories", nargs="+", required=True, metavar="LABEL",
                     help="the declared categories (at least two).")
    gof.add_argument("--probabilities", nargs="+", type=_positive_float, default=None,
                     metavar="P", help="null probability of each category, in the order of "
                                       "--categories (default: uniform).")
    _add_common(gof, permutations=False, resamples=True)
    out["chi2"] = gof

    ind = subs.add_parser(
        "contingency", help="chi-squared-type independence test (DPContingencyTest).",
        description="Is --column independent of --by-column? Both are categorical with "
                    "declared categories; valid whatever the margins.")
    ind.add_argument("--column", required=True, metavar="COL")
    ind.add_argument("--by-column", required=True, metavar="COL")
    ind.add_argument("--categories", nargs="+", required=True, metavar="LABEL",
                     help="the declared categories of --column.")
    ind.add_argument("--by-categories", nargs="+", required=True, metavar="LABEL",
                     help="the declared categories of --by-column.")
    _add_common(ind, permutations=False, resamples=True)
    out["contingency"] = ind
    return out


# -- data -------------------------------------------------------------------------------


def _read_csv(path):
    import pandas as pd  # only the data subcommands need it

    if not os.path.exists(path):
        raise _CliError(EXIT_BAD_INPUT, f"--file {path!r}: no such file")
    if os.path.isdir(path):
        raise _CliError(EXIT_BAD_INPUT, f"--file {path!r}: is a directory")
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise _CliError(EXIT_BAD_INPUT, f"--file {path!r}: the file is empty") from None
    except (pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise _CliError(EXIT_BAD_INPUT, f"--file {path!r}: cannot read it as CSV ({first})") \
            from None


def _column(frame, name, path, option):
    if name not in frame.columns:
        known = ", ".join(map(str, frame.columns))
        raise _CliError(EXIT_BAD_INPUT,
                        f"{option}: no column {name!r} in {path!r} (columns: {known})")
    column = frame[name]
    if column.isna().any():
        # The kind of problem only: a count or a line number would be read from private data.
        raise _CliError(
            EXIT_BAD_INPUT,
            f"{option}: column {name!r} has missing values; impute or drop them with a "
            "public rule before the test (data-dependent imputation is itself a release)")
    return column


def _numeric(frame, names, path, option):
    import pandas as pd

    columns = []
    for name in names:
        column = _column(frame, name, path, option)
        values = pd.to_numeric(column, errors="coerce")
        if values.isna().any():
            # No count, no line number, no value: each would be read from private data.
            raise _CliError(
                EXIT_BAD_INPUT,
                f"{option}: column {name!r} is not numeric (it holds values "
                "that are not numbers); encode them as numbers with a public rule first",
            )
        columns.append(values.to_numpy(dtype=np.float64))
    return np.column_stack(columns)


# -- the ledger -------------------------------------------------------------------------


def _stored_totals(path):
    """The totals (ε, δ) recorded in a ledger file, or None if they cannot be read.

    Only a hint: :class:`~skdptest.PrivacyBudget` then reopens the file and verifies
    all of it (marker, digest, hash chain), refusing anything damaged or foreign.
    """
    try:
        con = sqlite3.connect(Path(os.path.abspath(path)).as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        rows = con.execute("SELECT epsilon, delta, accountant FROM totals").fetchall()
    except (sqlite3.Error, UnicodeDecodeError):
        return None
    finally:
        con.close()
    if len(rows) != 1 or not all(type(v) is float for v in rows[0][:2]):
        return None
    return rows[0]


def _open_ledger(args):
    if args.ledger is None:
        return None
    path = args.ledger
    try:
        if args.budget_epsilon is not None:
            delta = 0.0 if args.budget_delta is None else args.budget_delta
            return PrivacyBudget(args.budget_epsilon, delta, path=path)
        if not os.path.lexists(path):
            raise _CliError(EXIT_LEDGER, f"--ledger {path!r}: no such ledger; pass "
                                         "--budget-epsilon (and --budget-delta) to create it")
        totals = _stored_totals(path)
        if totals is None:
            # Not readable as a ledger: the constructor says exactly why (the file exists,
            # so it never creates one here).
            return PrivacyBudget(1.0, 0.0, path=path)
        if args.budget_delta is not None and args.budget_delta != totals[1]:
            raise _CliError(EXIT_LEDGER, f"--ledger {path!r}: holds delta={totals[1]}, "
                                         f"not --budget-delta {args.budget_delta}")
        accountant = totals[2] if totals[2] in ("basic", "zcdp", "rdp") else "basic"
        return PrivacyBudget(totals[0], totals[1], path=path, accountant=accountant)
    except LedgerError as exc:
        raise _CliError(EXIT_LEDGER, str(exc)) from None
    except (ValueError, TypeError) as exc:  # e.g. an unusable path
        raise _CliError(EXIT_LEDGER, f"--ledger {path!r}: {exc}") from None


def _ledger_summary(budget):
    if budget is None:
        return None
    spent, remaining = budget.spent, budget.remaining
    return {
        "path": budget.path,
        "epsilon": budget.epsilon,
        "delta": budget.delta,
        "spent_epsilon": spent[0],
        "spent_delta": spent[1],
        "remaining_epsilon": remaining[0],
        "remaining_delta": remaining[1],
        "n_releases": len(budget),
    }


# -- results ----------------------------------------------------------------------------


def _plain(value):
    """A JSON value for a result field (strict JSON: non-finite floats become strings)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str):
        return value
    return repr(value)


def result_fields(result):
    """Every field of a frozen result, plus its ``pvalue`` where it is a property.

    Parameters
    ----------
    result : TestResult

    Returns
    -------
    dict
        Field name to JSON-ready value.
    """
    fields = {f.name: _plain(getattr(result, f.name)) for f in dataclasses.fields(result)}
    if "pvalue" not in fields and hasattr(result, "pvalue"):
        fields["pvalue"] = _plain(result.pvalue)
    return fields


def _report(args, result, budget, spent=None):
    fields = result_fields(result)
    ledger = _ledger_summary(budget)
    if args.json:
        # privacy_spent: what this run charged (ε, δ, profile, ledger) for output checkers.
        payload = {"command": args.command, "result_type": type(result).__name__,
                   "result": fields, "ledger": ledger, "privacy_spent": _plain(spent)}
        print(json.dumps(payload, allow_nan=False, sort_keys=True))
        return
    print(f"{type(result).__name__} ({args.command})")
    for name, value in fields.items():
        print(f"  {name}: {value}")
    if ledger is not None:
        print(f"ledger {ledger['path']}: spent epsilon={ledger['spent_epsilon']:g}, "
              f"delta={ledger['spent_delta']:g} of epsilon={ledger['epsilon']:g}, "
              f"delta={ledger['delta']:g} ({ledger['n_releases']} releases)")


# -- subcommands ------------------------------------------------------------------------


def _kernel_options(args, prefix=""):
    name = prefix.replace("-", "_")
    options = {f"{name}kernel": getattr(args, f"{name}kernel")}
    bandwidth = getattr(args, f"{name}bandwidth")
    if bandwidth is not None:
        options[f"{name}kernel_params"] = {"gamma": bandwidth}
    return options


def _kernel_test(args, frame):
    common = dict(epsilon=args.epsilon, alpha=args.alpha, n_permutations=args.n_permutations,
                  method=args.method, **_kernel_options(args))
    cyclic = False if args.random_permutations else "auto"
    if args.command == "mmd":
        X = _numeric(frame, args.columns, args.file, "--columns")
        y = _column(frame, args.group_column, args.file, "--group-column").to_numpy()
        return skdptest.DPMMDTest(**common, cyclic=cyclic), X, y
    X = _numeric(frame, args.x_columns, args.file, "--x-columns")
    y = _numeric(frame, args.y_columns, args.file, "--y-columns")
    return skdptest.DPHSICTest(**common, **_kernel_options(args, "y-"), cyclic=cyclic), X, y


def _labels(frame, name, args, option):
    return _column(frame, name, args.file, option).astype(str).to_numpy().reshape(-1, 1)


def _classical_test(args, frame):
    common = dict(epsilon=args.epsilon, alpha=args.alpha)
    if getattr(args, "n_resamples", None) is not None:
        common["n_resamples"] = args.n_resamples
    command = args.command
    if command == "proportion":
        X = _numeric(frame, [args.column], args.file, "--column")
        return skdptest.DPBinomialTest(null_proportion=args.null_proportion,
                                       alternative=args.alternative, **common), X, None
    if command in ("mannwhitney", "kruskal"):
        X = _numeric(frame, [args.column], args.file, "--column")
        y = _column(frame, args.group_column, args.file, "--group-column").to_numpy()
        if command == "mannwhitney":
            return skdptest.DPMannWhitneyTest(alternative=args.alternative, **common), X, y
        return skdptest.DPKruskalWallisTest(**common), X, y
    if command == "signedrank":
        X = _numeric(frame, [args.column], args.file, "--column")
        y = None
        if args.paired_column is not None:
            y = _numeric(frame, [args.paired_column], args.file, "--paired-column")[:, 0]
        return skdptest.DPWilcoxonTest(center=args.center, alternative=args.alternative,
                                       **common), X, y
    if command == "chi2":
        if args.probabilities is not None and len(args.probabilities) != len(args.categories):
            raise _CliError(EXIT_USAGE, "--probabilities must give one number per category")
        X = _labels(frame, args.column, args, "--column")
        return skdptest.DPChiSquareTest(categories=list(args.categories),
                                        probabilities=args.probabilities, **common), X, None
    X = np.column_stack([_labels(frame, args.column, args, "--column"),
                         _labels(frame, args.by_column, args, "--by-column")])
    categories = (list(args.categories), list(args.by_categories))
    return skdptest.DPContingencyTest(categories=categories, **common), X, None


def _estimator_and_data(args, frame):
    if args.command in ("mmd", "hsic"):
        return _kernel_test(args, frame)
    if args.command == "evalue":
        X = _numeric(frame, [args.column], args.file, "--column")
        return skdptest.PrivateEValueTest(args.null, args.alternative, epsilon=args.epsilon,
                                          alpha=args.alpha), X, None
    return _classical_test(args, frame)


#: Python-API advice in the estimators' messages, in the words of this tool's options.
_CLI_WORDS = [
    (r"y_kernel_params=\{['\"]gamma['\"]: ?\w+\}", "--y-bandwidth GAMMA"),
    (r"kernel_params=\{['\"]gamma['\"]: ?['\"]median['\"]\}", "--bandwidth median"),
    (r"kernel_params=\{['\"]gamma['\"]: ?\w+\}", "--bandwidth GAMMA"),
    (r"method=['\"]features['\"]", "--method features"),
    (r"method=['\"]exact['\"]", "--method exact"),
    (r"cyclic=False", "--random-permutations"),
    (r"\bn_permutations\b", "--n-permutations"),
    (r"\bn_resamples\b", "--n-resamples"),
]


def _cli_words(message):
    """An estimator's message with its Python-API advice rewritten as options."""
    for pattern, words in _CLI_WORDS:
        message = re.sub(pattern, words, message)
    return message


def _run_test(args):
    frame = _read_csv(args.file)
    estimator, X, y = _estimator_and_data(args, frame)
    budget = _open_ledger(args)
    # Unset seed: the estimator draws from OS entropy (the only safe choice for real data).
    estimator.set_params(budget=budget, random_state=args.seed)
    if args.seed is not None:
        print(_SEED_WARNING, file=sys.stderr)
    try:
        with warnings.catch_warnings():
            # The CLI printed its own seed warning above (once, in its own words).
            warnings.simplefilter("ignore", skdptest.FixedRandomStateWarning)
            result = estimator.test(X, y)
    except BudgetExceededError as exc:
        raise _CliError(EXIT_BUDGET, str(exc)) from None
    except LedgerError as exc:
        raise _CliError(EXIT_LEDGER, str(exc)) from None
    except InvalidParameterError as exc:
        # A parameter (or a pair, such as laws of different kinds) the estimator refuses.
        raise _CliError(EXIT_USAGE, _cli_words(str(exc))) from None
    except (ValueError, TypeError) as exc:
        # Raised before the charge (the contract): data the test cannot use.
        raise _CliError(EXIT_BAD_INPUT, _cli_words(str(exc))) from None
    _report(args, result, budget, getattr(estimator, "privacy_spent_", None))
    return EXIT_OK


def main(argv=None):
    """Run the ``skdptest`` command line; return its exit code.

    Parameters
    ----------
    argv : list of str, default=None
        Arguments without the program name (``sys.argv[1:]`` when None).

    Returns
    -------
    int
        0 success, 2 usage error, 3 bad input, 4 budget exhausted, 5 ledger error.
        argparse itself exits with 2 (``SystemExit``) on a malformed command line.
    """
    parser, subparsers = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if args.command == "demo":
        return demo()
    if args.ledger is None and (args.budget_epsilon is not None
                                or args.budget_delta is not None):
        subparsers[args.command].error("--budget-epsilon and --budget-delta need --ledger")
    if args.command == "evalue":
        kinds = {isinstance(law.dist, stats.rv_discrete)
                 for law in (args.null, args.alternative)}
        if len(kinds) > 1:
            subparsers["evalue"].error(
                "--null and --alternative must both be discrete or both continuous laws")
    try:
        return _run_test(args)
    except _CliError as exc:
        message = " ".join(str(exc).split())  # one line, whatever the source message
        print(f"skdptest {args.command}: error: {message}", file=sys.stderr)
        return exc.code
