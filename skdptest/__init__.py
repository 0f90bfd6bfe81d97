"""skdptest: differentially private hypothesis tests with scikit-learn conventions."""

from ._budget import BudgetExceededError, LedgerEntry, PrivacyBudget, PrivacyLeakWarning
from ._results import EProcessResult, EValueResult, PermutationTestResult, ThresholdResult
from .evalue import (
    OptimalRate,
    PrivateEProcess,
    PrivateEValueTest,
    expected_log_e_value,
    optimal_rate,
)
from .kernel import DPHSICTest, DPMMDTest
from .threshold import GeneralizedThresholdMechanism

__version__ = "0.1.0.dev0"

__all__ = [
    "BudgetExceededError",
    "DPHSICTest",
    "DPMMDTest",
    "EProcessResult",
    "EValueResult",
    "GeneralizedThresholdMechanism",
    "LedgerEntry",
    "OptimalRate",
    "PermutationTestResult",
    "PrivacyBudget",
    "PrivacyLeakWarning",
    "PrivateEProcess",
    "PrivateEValueTest",
    "ThresholdResult",
    "expected_log_e_value",
    "optimal_rate",
]
