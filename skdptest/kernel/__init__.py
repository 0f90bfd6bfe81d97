"""DP permutation kernel tests: the permutation framework, DPMMDTest, DPHSICTest."""

from ._hsic import DPHSICTest
from ._mmd import DPMMDTest

__all__ = ["DPHSICTest", "DPMMDTest"]
