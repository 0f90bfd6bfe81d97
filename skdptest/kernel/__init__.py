"""DP permutation kernel tests: DPMMDTest, DPHSICTest and their result."""

from ._hsic import DPHSICTest
from ._mmd import DPMMDTest
from ._results import PermutationTestResult

__all__ = ["DPHSICTest", "DPMMDTest", "PermutationTestResult"]
