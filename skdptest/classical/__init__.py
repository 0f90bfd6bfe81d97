"""Everyday private tests: proportions, ranks, distributions, tables, bounded means."""

from ._chi2 import DPChiSquareTest, DPContingencyTest
from ._kruskal import DPKruskalWallisTest
from ._ks import DPKolmogorovSmirnovTest
from ._mannwhitney import DPMannWhitneyTest
from ._results import ChiSquareTestResult
from ._wilcoxon import DPWilcoxonTest

__all__ = [
    "ChiSquareTestResult",
    "DPChiSquareTest",
    "DPContingencyTest",
    "DPKolmogorovSmirnovTest",
    "DPKruskalWallisTest",
    "DPMannWhitneyTest",
    "DPWilcoxonTest",
]
