"""Everyday private tests: proportions, ranks, distributions, tables, bounded means."""

from ._chi2 import DPChiSquareTest, DPContingencyTest
from ._ks import DPKolmogorovSmirnovTest
from ._results import ChiSquareTestResult

__all__ = [
    "ChiSquareTestResult",
    "DPChiSquareTest",
    "DPContingencyTest",
    "DPKolmogorovSmirnovTest",
]
