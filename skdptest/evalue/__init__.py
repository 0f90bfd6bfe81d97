"""Private e-values and e-processes for simple hypotheses."""

from ._bound import TwoPointEPowerBound, two_point_epower_bound
from ._confseq import PrivateConfidenceSequence
from ._confseq_result import ConfidenceSequenceResult
from ._eprocess import PrivateEProcess
from ._evalue import PrivateEValueTest, expected_log_e_value
from ._optimal import OptimalRate, optimal_rate
from ._results import EProcessResult, EValueResult

__all__ = [
    "ConfidenceSequenceResult",
    "EProcessResult",
    "EValueResult",
    "OptimalRate",
    "PrivateConfidenceSequence",
    "PrivateEProcess",
    "PrivateEValueTest",
    "TwoPointEPowerBound",
    "expected_log_e_value",
    "optimal_rate",
    "two_point_epower_bound",
]
