"""Everyday private tests: proportions, ranks, distributions, tables, bounded means."""

from ._aggregate import DPSubsampleAggregateTest
from ._chi2 import DPChiSquareTest, DPContingencyTest
from ._kruskal import DPKruskalWallisTest
from ._ks import DPKolmogorovSmirnovTest
from ._mannwhitney import DPMannWhitneyTest
from ._mean import DPBoundedMeanTest
from ._proportion import DPBinomialTest
from ._results import (
    BinomialTestResult,
    BoundedMeanResult,
    ChiSquareTestResult,
    ClassicalTestResult,
)
from ._wilcoxon import DPWilcoxonTest

__all__ = [
    "BinomialTestResult",
    "BoundedMeanResult",
    "ChiSquareTestResult",
    "ClassicalTestResult",
    "DPBinomialTest",
    "DPBoundedMeanTest",
    "DPChiSquareTest",
    "DPContingencyTest",
    "DPKolmogorovSmirnovTest",
    "DPKruskalWallisTest",
    "DPMannWhitneyTest",
    "DPSubsampleAggregateTest",
    "DPWilcoxonTest",
]
