"""Transitional alias: the kernel family's oracles moved to tests/kernel/_reference.py
(removed once the last test file imports them from there)."""

from tests.kernel._reference import _fixed, laplace_difference_tail, noise_audit  # noqa: F401
