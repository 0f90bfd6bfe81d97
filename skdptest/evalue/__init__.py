"""Private e-values and e-processes for simple hypotheses."""

from ._evalue import PrivateEValueTest
from ._optimal import OptimalRate, optimal_rate

__all__ = ["OptimalRate", "PrivateEValueTest", "optimal_rate"]
