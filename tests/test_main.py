"""The demo (``python -m skdptest demo``, ``skdptest-demo``) and the README's examples."""

import re
import runpy
from pathlib import Path

import pytest

import skdptest
from skdptest.__main__ import AB_TEST, demo_main, main, simulate


@pytest.mark.slow
def test_demo_is_reproducible_through_the_console_script(capsys):
    # A second demo run (~0.5 s); the default test below checks the demo's output, and
    # test_demo_help_and_bad_arguments that demo_main routes to it.
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert demo_main([]) == 0  # the skdptest-demo console script
    assert capsys.readouterr().out == out  # fixed seeds: the demo is reproducible


def test_demo_prints_the_e_value_and_the_ledger(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    match = re.search(r"e-value = (\S+) \(log e-value (\S+) nats\)", out)
    assert match is not None, out
    assert float(match.group(1)) > 0
    assert "Privacy ledger" in out
    assert re.search(r"^\s+1\s+PrivateEValueTest\.fit\s+1\s+0$", out, flags=re.M), out
    # Every estimator the demo ran is one line of the ledger, each charged ε = 1.
    ran = [(name, method) for name, method in [
        ("PrivateEProcess", "partial_fit"),
        ("DPMMDTest", "fit"),
        ("DPHSICTest", "fit"),
        ("GeneralizedThresholdMechanism", "fit"),
    ] if hasattr(skdptest, name)]
    for name, method in ran:
        assert re.search(rf"^\s+\d+\s+{name}\.{method}\s+1\s+0$", out, flags=re.M), out
    n = 1 + len(ran)
    assert f"spent: epsilon={n}, delta=0; remaining: epsilon={6 - n}" in out
    if hasattr(skdptest, "PrivateEProcess"):
        assert re.search(r"decision after day \d+: (reject|accept|continue)", out), out


def test_demo_help_and_bad_arguments(capsys):
    with pytest.raises(SystemExit, match="0"):
        main(["demo", "--help"])
    assert "no download" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="0"):
        demo_main(["--help"])
    assert "no download" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="2"):
        main(["demo", "--no-such-option"])
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err
    # Without a subcommand the tool prints its help (naming the demo) and exits 2.
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "demo" in err and "exit codes" in err


def test_simulated_data_shapes():
    converted_b, log_minutes, variant, converted = simulate()
    n = AB_TEST["n_users"]
    assert converted_b.shape == (n, 1)
    assert set(converted_b.ravel().tolist()) <= {0.0, 1.0}
    assert log_minutes.shape == (2 * n, 1)
    assert variant.tolist() == ["A"] * n + ["B"] * n
    assert converted.shape == (2 * n,)


README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    examples = [b for b in blocks if "import" in b]  # the pipeline snippet is a fragment
    assert examples
    for code in examples:
        exec(compile(code, str(README), "exec"), {})
    out = capsys.readouterr().out
    assert "(1.0, 0.0)" in out
    assert "PrivateEValueTest.fit 1.0 0.0" in out
    # The tour charges each of the five estimators ε = 1 to one budget of ε = 5.
    assert "PrivacyBudget(epsilon=5.0, delta=0.0, spent=(5.0, 0.0))" in out


def test_readme_set_up_commands():
    commands = re.findall(r"```bash\n(.*?)\n```", README.read_text(), flags=re.S)
    assert commands == [
        "pip install -e . && python -m skdptest demo",
        'pip install -e ".[test]" && python -m pytest',
    ]


def test_readme_claims_only_exported_estimators():
    text = README.read_text()
    for name in ("PrivateEValueTest", "PrivateEProcess", "GeneralizedThresholdMechanism",
                 "DPMMDTest", "DPHSICTest"):
        row = re.search(rf"^\| `{name}` \|.*\| (.+) \|$", text, flags=re.M)
        assert row is not None, name
        # Never claim an estimator the package does not export.
        if row.group(1) == "available":
            assert name in skdptest.__all__, name


def test_budget_grid_search_example_runs(capsys):
    path = Path(__file__).resolve().parents[1] / "examples" / "budget_grid_search.py"
    module = runpy.run_path(str(path))  # defines main() without running it
    budget = module["main"](n_jobs=1)
    out = capsys.readouterr().out
    assert "recorded releases: 13" in out
    assert len(budget) == 13
    assert "With a total of epsilon=5: stopped after 8 releases" in out
