"""skdptest: differentially private hypothesis tests with scikit-learn conventions."""

from ._base import InvalidDataError
from ._budget import (
    BudgetExceededError,
    BudgetReport,
    LedgerEntry,
    LedgerError,
    LedgerNotFoundError,
    PrivacyBudget,
    PrivacySpent,
    default_budget,
)
from ._interval import ConfidenceInterval
from ._params import InvalidParameterError
from ._results import TestResult
from ._search import SearchCost, search_cost
from ._warnings import FixedRandomStateWarning, PrivacyLeakWarning
from .classical import (
    BinomialTestResult,
    BoundedMeanResult,
    ChiSquareTestResult,
    ClassicalTestResult,
    DPBinomialTest,
    DPBoundedMeanTest,
    DPChiSquareTest,
    DPContingencyTest,
    DPKolmogorovSmirnovTest,
    DPKruskalWallisTest,
    DPMannWhitneyTest,
    DPSubsampleAggregateTest,
    DPWilcoxonTest,
)
from .evalue import (
    ConfidenceSequenceResult,
    EProcessResult,
    EValueResult,
    OptimalRate,
    PrivateConfidenceSequence,
    PrivateEProcess,
    PrivateEValueTest,
    expected_log_e_value,
    optimal_rate,
)
from .kernel import DPHSICTest, DPMMDTest, PermutationTestResult
from .threshold import GeneralizedThresholdMechanism, ThresholdResult

__version__ = "0.1.0.dev0"

__all__ = [
    "BinomialTestResult",
    "BoundedMeanResult",
    "BudgetExceededError",
    "ChiSquareTestResult",
    "ClassicalTestResult",
    "ConfidenceInterval",
    "DPBinomialTest",
    "DPBoundedMeanTest",
    "DPChiSquareTest",
    "DPContingencyTest",
    "DPHSICTest",
    "DPKolmogorovSmirnovTest",
    "DPKruskalWallisTest",
    "DPMMDTest",
    "DPMannWhitneyTest",
    "DPSubsampleAggregateTest",
    "DPWilcoxonTest",
    "ConfidenceSequenceResult",
    "EProcessResult",
    "EValueResult",
    "FixedRandomStateWarning",
    "GeneralizedThresholdMechanism",
    "InvalidDataError",
    "InvalidParameterError",
    "LedgerEntry",
    "LedgerError",
    "LedgerNotFoundError",
    "OptimalRate",
    "PermutationTestResult",
    "PrivacyBudget",
    "PrivacyLeakWarning",
    "PrivacySpent",
    "BudgetReport",
    "SearchCost",
    "search_cost",
    "default_budget",
    "PrivateConfidenceSequence",
    "PrivateEProcess",
    "PrivateEValueTest",
    "TestResult",
    "ThresholdResult",
    "expected_log_e_value",
    "optimal_rate",
]
