"""Smoke test of examples/gtm_continual_observation.py (no plot)."""

import pathlib
import runpy

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "gtm_continual_observation.py"


def test_continual_observation_example_runs(capsys):
    module = runpy.run_path(str(EXAMPLE), run_name="example")
    releases = module["main"](seed=0, plot=False)
    out = capsys.readouterr().out
    assert len(releases) >= 2
    assert [d for d, _ in releases] == sorted(d for d, _ in releases)
    assert "epsilon spent" in out and "GeneralizedThresholdMechanism.fit" in out
