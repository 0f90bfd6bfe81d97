"""Peer algorithms used only for comparison in tests and benchmarks.

Shipped estimators never import this package.
"""

from ._dpsprt import DPSPRT, dpsprt_boundaries
from ._lt19 import (
    cln23_reference_p_bar,
    lt19_acceptance_probability,
    lt19_cap,
    lt19_expected_runs,
    lt19_reference_p_bar,
    lt19_threshold,
    sequential_lt_output_probabilities,
    sequential_lt_privacy,
    sequential_lt_test,
)
from ._sprt import SPRT, SequentialRuns, SequentialTestResult

__all__ = [
    "DPSPRT",
    "SPRT",
    "SequentialRuns",
    "SequentialTestResult",
    "cln23_reference_p_bar",
    "dpsprt_boundaries",
    "lt19_acceptance_probability",
    "lt19_cap",
    "lt19_expected_runs",
    "lt19_reference_p_bar",
    "lt19_threshold",
    "sequential_lt_output_probabilities",
    "sequential_lt_privacy",
    "sequential_lt_test",
]
