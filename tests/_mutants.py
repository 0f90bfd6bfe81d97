"""Privacy mutants shared by the families' tests (the checks must catch them).

Imported by full name, ``from tests._mutants import ...`` (pyproject's pytest options put
the repository root on ``sys.path``).
"""

import dataclasses


def halve_permutation_noise(monkeypatch):
    """Make the core's DP permutation release add half its noise: the discrete Laplace
    rate doubled on the same grid (``skdptest._permutation.permutation_noise``), the
    mutant of every permutation test's grey-box audit (kernel and classical families)."""
    from skdptest import _permutation

    honest = _permutation.permutation_noise

    def halved(*args, **kwargs):
        noise = honest(*args, **kwargs)
        return dataclasses.replace(noise, rate=2 * noise.rate, scale=noise.scale / 2)

    monkeypatch.setattr(_permutation, "permutation_noise", halved)
