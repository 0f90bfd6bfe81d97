"""The ``skdptest`` command line (``python -m skdptest``): subcommands, JSON, exit codes.

Every case runs in-process through ``skdptest.cli.main`` (fast) and, in the ``slow``
run, as a real command: ``subprocess.run([sys.executable, "-m", "skdptest", ...])``
(each such run pays ~3 s of imports). In the default suite the module entry point
(``python -m skdptest``) runs once through runpy, in this interpreter.
"""

import dataclasses
import io
import json
import re
import runpy
import subprocess
import sys
import warnings
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import skdptest
from skdptest import DPHSICTest, DPMMDTest, PrivacyBudget, PrivateEValueTest
from skdptest.cli import main, parse_law

N = 40


def _cli(args, mode):
    """Run the tool; return (exit code, stdout, stderr)."""
    args = [str(a) for a in args]
    if mode == "subprocess":
        proc = subprocess.run(
            [sys.executable, "-m", "skdptest", *args],
            capture_output=True, text=True, timeout=300, check=False,
        )
        return proc.returncode, proc.stdout, proc.stderr
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as exc:  # argparse's usage errors and --help
            code = exc.code
    return code, out.getvalue(), err.getvalue()


MODES = ["inprocess", pytest.param("subprocess", marks=pytest.mark.slow)]


@pytest.fixture(params=MODES)
def mode(request):
    return request.param


@pytest.fixture
def data(tmp_path):
    """A small CSV (numeric a, b, c; 0/1 column k; string group g) and its frame."""
    rng = np.random.default_rng(7)
    frame = pd.DataFrame({
        "a": rng.normal(size=N),
        "b": rng.normal(size=N),
        "c": rng.uniform(size=N),
        "k": rng.binomial(1, 0.6, size=N),
        "g": np.repeat(["ctl", "trt"], N // 2),
    })
    path = tmp_path / "data.csv"
    frame.to_csv(path, index=False)
    return path, frame


def _no_constants(name):
    raise AssertionError(f"non-standard JSON constant {name}")


def _json(stdout):
    # Strict JSON: NaN or Infinity would not parse elsewhere.
    return json.loads(stdout, parse_constant=_no_constants)


def _expected_fields(result):
    """Every field of the frozen result and its pvalue, as JSON would carry them."""
    expected = json.loads(json.dumps(dataclasses.asdict(result)))
    expected["pvalue"] = result.pvalue
    return expected


def _assert_one_line_error(code, out, err, expected_code, pattern):
    assert code == expected_code, (code, out, err)
    assert out == ""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("skdptest "), err
    assert re.search(pattern, lines[0]), err


# -- each subcommand, its JSON, against the estimator run directly ----------------------


def test_mmd_json_is_the_estimators_result(data, mode):
    path, frame = data
    code, out, err = _cli(["mmd", "--file", path, "--columns", "a", "b", "--group-column", "g",
                           "--epsilon", 2, "--alpha", 0.1, "--n-permutations", 19,
                           "--seed", 3, "--json"], mode)
    assert code == 0, err
    payload = _json(out)
    expected = DPMMDTest(epsilon=2.0, alpha=0.1, n_permutations=19, random_state=3).test(
        frame[["a", "b"]].to_numpy(), frame["g"].to_numpy())
    assert payload["command"] == "mmd"
    assert payload["result_type"] == "PermutationTestResult"
    # Every field of the frozen result, nothing more (no raw statistic leaves the tool).
    assert payload["result"] == _expected_fields(expected)
    # a request for fewer than 999 relabellings keeps them (cyclic="auto"), no warning
    assert payload["result"]["n_permutations"] == 19
    assert payload["result"]["epsilon"] == 2.0 and payload["result"]["alpha"] == 0.1
    assert payload["ledger"] is None
    assert "--seed fixes the noise" in err  # the seed is flagged as unsafe for real data


def test_hsic_json_is_the_estimators_result(data, mode):
    path, frame = data
    # the default cyclic test (n - 1 shifts; --n-permutations would be ignored, with a
    # warning; --random-permutations is tested below)
    code, out, err = _cli(["hsic", "--file", path, "--x-columns", "a", "--y-columns", "b", "c",
                           "--seed", 5, "--json"], mode)
    assert code == 0, err
    payload = _json(out)
    expected = DPHSICTest(random_state=5).test(
        frame[["a"]].to_numpy(), frame[["b", "c"]].to_numpy())
    assert payload["result_type"] == "PermutationTestResult"
    assert payload["result"] == _expected_fields(expected)
    assert payload["result"]["n_samples"] == N


def test_evalue_json_is_the_estimators_result(data, mode):
    path, frame = data
    code, out, err = _cli(["evalue", "--file", path, "--column", "k",
                           "--null", "bernoulli(p=0.3)", "--alternative", " bernoulli( 0.6 ) ",
                           "--epsilon", 0.5, "--seed", 11, "--json"], mode)
    assert code == 0, err
    payload = _json(out)
    expected = PrivateEValueTest(stats.bernoulli(0.3), stats.bernoulli(0.6), epsilon=0.5,
                                 random_state=11).test(frame[["k"]].to_numpy())
    assert payload["result_type"] == "EValueResult"
    assert payload["result"] == _expected_fields(expected)
    assert payload["result"]["epsilon"] == 0.5


def test_plain_output_lists_the_fields(data, tmp_path):
    path, _ = data
    ledger = tmp_path / "ledger.sqlite"
    code, out, err = _cli(["evalue", "--file", path, "--column", "k", "--null", "bernoulli(0.3)",
                           "--alternative", "bernoulli(0.6)", "--ledger", ledger,
                           "--budget-epsilon", 3], "inprocess")
    assert code == 0, err
    assert err == ""  # no seed, no warning
    lines = out.splitlines()
    assert lines[0] == "EValueResult (evalue)"
    for name in ("reject", "alpha", "epsilon", "delta", "n_samples", "e_value", "pvalue"):
        assert any(line.startswith(f"  {name}: ") for line in lines), (name, out)
    assert lines[-1] == (f"ledger {ledger}: spent epsilon=1, delta=0 of epsilon=3, delta=0 "
                         "(1 releases)")


def test_unset_seed_means_os_entropy(data, monkeypatch):
    # The estimator the tool builds gets random_state=None (OS entropy) unless --seed.
    seen = []

    class Recording(PrivateEValueTest):
        def test(self, X=None, y=None):
            seen.append(self.get_params()["random_state"])
            return super().test(X, y)

    monkeypatch.setattr(skdptest, "PrivateEValueTest", Recording)
    path, _ = data
    args = ["evalue", "--file", path, "--column", "k", "--null", "bernoulli(0.3)",
            "--alternative", "bernoulli(0.6)", "--json"]
    assert _cli(args, "inprocess")[0] == 0
    assert _cli([*args, "--seed", 4], "inprocess")[0] == 0
    assert seen == [None, 4]


def test_same_seed_same_release(data):
    path, _ = data
    args = ["mmd", "--file", path, "--columns", "a", "--group-column", "g",
            "--n-permutations", 19, "--seed", 9, "--json"]
    first, second = _cli(args, "inprocess"), _cli(args, "inprocess")
    assert first[0] == second[0] == 0
    assert _json(first[1]) == _json(second[1])


def _run_as_main(args, monkeypatch, capsys):
    """``python -m skdptest ARGS`` in this interpreter: runpy runs the package's
    ``__main__`` as ``-m`` does, without a new interpreter's 3 s of imports."""
    monkeypatch.setattr(sys, "argv", ["skdptest", *args])
    # As at the start of `-m` (runpy warns when the module it runs is already imported).
    monkeypatch.delitem(sys.modules, "skdptest.__main__", raising=False)
    with pytest.raises(SystemExit) as info:
        runpy.run_module("skdptest", run_name="__main__", alter_sys=True)
    out, err = capsys.readouterr()
    return info.value.code, out, err


def _run_in_a_new_interpreter(args, monkeypatch, capsys):
    proc = subprocess.run([sys.executable, "-m", "skdptest", *args],
                          capture_output=True, text=True, timeout=300, check=False)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("run", [
    pytest.param(_run_as_main, id="runpy"),
    pytest.param(_run_in_a_new_interpreter, id="subprocess", marks=pytest.mark.slow),
])
def test_python_dash_m_runs_the_command_line(data, tmp_path, run, monkeypatch, capsys):
    # The module entry point (`if __name__ == "__main__"` in skdptest/__main__.py) and the
    # exit code it hands back; in the default suite through runpy, the way `-m` runs it
    # (every case also runs as a real command in the slow suite).
    path, _ = data
    ledger = tmp_path / "ledger.sqlite"
    code, out, err = run(
        ["evalue", "--file", str(path), "--column", "k", "--null", "bernoulli(0.3)",
         "--alternative", "bernoulli(0.6)", "--ledger", str(ledger), "--budget-epsilon", "2",
         "--json"], monkeypatch, capsys)
    assert code == 0, err
    payload = _json(out)
    assert payload["result_type"] == "EValueResult"
    assert payload["ledger"]["n_releases"] == 1
    assert [(e.label, e.epsilon) for e in PrivacyBudget(2.0, path=ledger).ledger] == [
        ("PrivateEValueTest.fit", 1.0)]


@pytest.mark.slow
def test_demo_subcommand_runs(mode):
    code, out, err = _cli(["demo"], mode)
    assert code == 0, err
    assert "Privacy ledger" in out
    assert "spent: epsilon=5, delta=0; remaining: epsilon=1" in out


# -- the ledger: persists across invocations, refuses when spent ------------------------


def test_ledger_persists_across_invocations_and_refuses_the_third(data, tmp_path, mode):
    path, _ = data
    ledger = tmp_path / "ledger.sqlite"
    args = ["evalue", "--file", path, "--column", "k", "--null", "bernoulli(0.3)",
            "--alternative", "bernoulli(0.6)", "--ledger", ledger, "--json"]
    # The first run creates the ledger (ε = 2 in all); the second reopens it by path.
    code, out, err = _cli([*args, "--budget-epsilon", 2], mode)
    assert code == 0, err
    first = _json(out)["ledger"]
    assert first == {"path": str(ledger), "epsilon": 2.0, "delta": 0.0, "spent_epsilon": 1.0,
                     "spent_delta": 0.0, "remaining_epsilon": 1.0, "remaining_delta": 0.0,
                     "n_releases": 1}
    code, out, err = _cli(args, mode)
    assert code == 0, err
    second = _json(out)["ledger"]
    assert (second["spent_epsilon"], second["remaining_epsilon"], second["n_releases"]) == (
        2.0, 0.0, 2)
    code, out, err = _cli(args, mode)
    _assert_one_line_error(code, out, err, 4,
                           r"Privacy budget exceeded: asked for epsilon=1.*Nothing was recorded")
    entries = PrivacyBudget(2.0, path=ledger).ledger
    assert [(e.label, e.epsilon, e.delta) for e in entries] == [
        ("PrivateEValueTest.fit", 1.0, 0.0)] * 2


def test_each_release_charges_its_epsilon_once(data, tmp_path):
    # The charge is what the privacy argument composes: exactly --epsilon, once per run.
    path, _ = data
    ledger = tmp_path / "ledger.sqlite"
    runs = [
        ["mmd", "--columns", "a", "--group-column", "g", "--n-permutations", 19,
         "--epsilon", 0.25],
        ["hsic", "--x-columns", "a", "--y-columns", "c", "--epsilon", 0.5],
        ["evalue", "--column", "k", "--null", "binom(1, 0.3)", "--alternative",
         "bernoulli(p=0.6)", "--epsilon", 0.75],
    ]
    for i, run in enumerate(runs):
        extra = ["--budget-epsilon", 5] if i == 0 else []
        code, _, err = _cli([run[0], "--file", path, *run[1:], "--ledger", ledger, *extra],
                            "inprocess")
        assert code == 0, err
    entries = PrivacyBudget(5.0, path=ledger).ledger
    assert [(e.label, e.epsilon) for e in entries] == [
        ("DPMMDTest.fit", 0.25), ("DPHSICTest.fit", 0.5), ("PrivateEValueTest.fit", 0.75)]


# -- exit codes -------------------------------------------------------------------------


def test_ledger_errors_exit_5(data, tmp_path, mode):
    path, _ = data
    args = ["evalue", "--file", path, "--column", "k", "--null", "bernoulli(0.3)",
            "--alternative", "bernoulli(0.6)"]
    missing = tmp_path / "nope.sqlite"
    _assert_one_line_error(*_cli([*args, "--ledger", missing], mode), 5,
                           r"no such ledger; pass --budget-epsilon")
    assert not missing.exists()  # never created without totals

    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a ledger at all" * 10)
    _assert_one_line_error(*_cli([*args, "--ledger", garbage], mode), 5,
                           r"not an SQLite database")
    assert garbage.read_bytes() == b"not a ledger at all" * 10

    ledger = tmp_path / "ledger.sqlite"
    PrivacyBudget(2.0, path=ledger)
    _assert_one_line_error(*_cli([*args, "--ledger", ledger, "--budget-epsilon", 3], mode), 5,
                           r"created with epsilon=2\.0.*cannot be reopened with epsilon=3\.0")
    _assert_one_line_error(*_cli([*args, "--ledger", ledger, "--budget-delta", 1e-6], mode),
                           5, r"holds delta=0\.0, not --budget-delta 1e-06")
    assert len(PrivacyBudget(2.0, path=ledger)) == 0

    _assert_one_line_error(
        *_cli([*args, "--ledger", tmp_path / "no-dir" / "l.sqlite", "--budget-epsilon", 1],
              mode), 5, r"does not exist")


def _bad_inputs(tmp_path, frame):
    missing_values = frame.copy()
    missing_values.loc[3, "a"] = np.nan
    missing_values.to_csv(tmp_path / "holes.csv", index=False)
    words = frame.astype({"a": object})
    words.loc[2, "a"] = "n/a-ish"
    words.to_csv(tmp_path / "words.csv", index=False)
    (tmp_path / "empty.csv").write_text("")
    outside = frame.copy()
    outside.loc[0, "k"] = 2  # outside the support {0, 1} of the Bernoulli null
    outside.to_csv(tmp_path / "outside.csv", index=False)
    one_group = frame.assign(g="ctl")
    one_group.to_csv(tmp_path / "one_group.csv", index=False)
    evalue = ["evalue", "--column", "k", "--null", "bernoulli(0.3)",
              "--alternative", "bernoulli(0.6)"]
    return [
        (["mmd", "--columns", "a", "--group-column", "g"], "missing.csv",
         r"--file '.*missing\.csv': no such file"),
        (["mmd", "--columns", "a", "--group-column", "g"], ".", r"is a directory"),
        (["mmd", "--columns", "a", "--group-column", "g"], "empty.csv", r"the file is empty"),
        (["mmd", "--columns", "a", "zz", "--group-column", "g"], "data.csv",
         r"--columns: no column 'zz' in .* \(columns: a, b, c, k, g\)"),
        (["mmd", "--columns", "a", "--group-column", "gg"], "data.csv",
         r"--group-column: no column 'gg'"),
        (["hsic", "--x-columns", "a", "--y-columns", "b"], "holes.csv",
         r"--x-columns: column 'a' has missing values; impute or drop them with a public"),
        (["hsic", "--x-columns", "b", "--y-columns", "a"], "words.csv",
         r"--y-columns: column 'a' is not numeric \(it holds values that"),
        (["evalue", "--column", "g", "--null", "bernoulli(0.3)",
          "--alternative", "bernoulli(0.6)"], "data.csv", r"--column: column 'g' is not numeric"),
        (evalue, "outside.csv", r"outside the support of the null"),
        (["mmd", "--columns", "a", "--group-column", "g"], "one_group.csv", r"DPMMDTest"),
    ]


def test_bad_input_exits_3_and_charges_nothing(data, tmp_path, mode):
    _, frame = data
    ledger = tmp_path / "ledger.sqlite"
    PrivacyBudget(5.0, path=ledger)
    for args, name, pattern in _bad_inputs(tmp_path, frame):
        file = tmp_path / name
        result = _cli([args[0], "--file", file, *args[1:], "--ledger", ledger], mode)
        _assert_one_line_error(*result, 3, pattern)
    # Bad input is refused before the charge: the ledger holds nothing.
    assert len(PrivacyBudget(5.0, path=ledger)) == 0


@pytest.mark.parametrize("args, pattern", [
    ([], r"usage: skdptest"),
    (["frobnicate"], r"invalid choice: 'frobnicate'"),
    (["mmd", "--columns", "a", "--group-column", "g"], r"required: --file"),
    (["mmd", "--file", "x.csv", "--columns", "a", "--group-column", "g", "--epsilon", "-1"],
     r"argument --epsilon: '-1' is not a finite number > 0"),
    (["mmd", "--file", "x.csv", "--columns", "a", "--group-column", "g", "--epsilon", "nan"],
     r"argument --epsilon: 'nan' is not a finite number > 0"),
    (["hsic", "--file", "x.csv", "--x-columns", "a", "--y-columns", "b", "--alpha", "1.5"],
     r"argument --alpha: '1.5' is not in \(0, 1\)"),
    (["hsic", "--file", "x.csv", "--x-columns", "a", "--y-columns", "b",
      "--n-permutations", "0"], r"argument --n-permutations: '0' is not an integer >= 1"),
    (["hsic", "--file", "x.csv", "--x-columns", "a", "--y-columns", "b", "--seed", "x"],
     r"argument --seed: 'x' is not an integer"),
    (["evalue", "--file", "x.csv", "--column", "k", "--null", "__import__('os')",
      "--alternative", "bernoulli(0.6)"], r"argument --null: .* is not of the form"),
    (["evalue", "--file", "x.csv", "--column", "k", "--null", "bernoulli(0.3)",
      "--alternative", "norm(0, 1)"], r"both be discrete or both continuous"),
    (["evalue", "--file", "x.csv", "--column", "k", "--null", "bernoulli(0.3)",
      "--alternative", "bernoulli(0.6)", "--budget-epsilon", "1"],
     r"--budget-epsilon and --budget-delta need --ledger"),
    (["mmd", "--file", "x.csv", "--columns", "a", "--group-column", "g",
      "--n-permutations", "2000000"], r"--n-permutations must be an int in \[1, 1e\+06\]"),
])
def test_usage_errors_exit_2(args, pattern, data):
    # Refused by argparse, or (the last case) by DPMMDTest's parameter constraint.
    path, _ = data
    args = [str(path) if a == "x.csv" else a for a in args]
    code, out, err = _cli(args, "inprocess")
    assert code == 2, (code, out, err)
    assert out == ""
    assert "Traceback" not in err
    assert re.search(pattern, err), err


@pytest.mark.slow
def test_usage_error_from_the_command_line():
    proc = subprocess.run([sys.executable, "-m", "skdptest", "mmd", "--epsilon", "0"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 2
    assert "usage: skdptest mmd" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- the law grammar (nothing is evaluated) ---------------------------------------------


@pytest.mark.parametrize("text, name, args, kwds", [
    ("bernoulli(0.3)", "bernoulli", (0.3,), {}),
    ("norm(loc=0.5, scale=2)", "norm", (), {"loc": 0.5, "scale": 2}),
    ("  binom( 10 , p = 2.5e-1 ) ", "binom", (10,), {"p": 0.25}),
    ("norm()", "norm", (), {}),
    ("uniform(-1, .5)", "uniform", (-1, 0.5), {}),
])
def test_parse_law_accepts_the_grammar(text, name, args, kwds):
    law = parse_law(text)
    assert law.dist.name == name
    assert law.args == args and law.kwds == kwds
    assert [type(a) for a in law.args] == [type(a) for a in args]  # binom's n stays an int
    expected = getattr(stats, name)(*args, **kwds)
    assert law.mean() == pytest.approx(expected.mean())


@pytest.mark.parametrize("text, pattern", [
    ("__import__('os').system('true')", r"not of the form name\("),
    ("stats.norm(0, 1)", r"not of the form name\("),
    ("norm(0, 1).rvs()", r"'1\).rvs\(' is not a number or key=number"),
    ("norm(abs(1))", r"'abs\(1\)' is not a number or key=number"),
    ("norm(1e400)", r"not a finite number"),
    ("norm(inf)", r"'inf' is not a number or key=number"),
    ("norm(loc=nan)", r"'loc=nan' is not a number or key=number"),
    ("ttest_ind(1, 2)", r"'ttest_ind' is not a scipy.stats distribution"),
    ("nosuchlaw(1)", r"'nosuchlaw' is not a scipy.stats distribution"),
    ("norm(loc=1, loc=2)", r"keyword 'loc' given twice"),
    ("norm(loc=1, 2)", r"positional argument after a keyword argument"),
    ("bernoulli(1.5)", r"invalid parameters for scipy.stats.bernoulli"),
    ("binom(3)", r"missing 1 required positional argument"),
    ("norm(foo=1)", r"unexpected keyword argument 'foo'"),
    ("norm(" + "1, " * 100 + "1)", r"longer than 200 characters"),
])
def test_parse_law_refuses_everything_else(text, pattern):
    with pytest.raises(ValueError, match=pattern):
        parse_law(text)


def test_parse_law_needs_a_string():
    with pytest.raises(TypeError, match="a law must be given as a str, got float"):
        parse_law(0.3)


@pytest.mark.parametrize("bad_value, column_args", [
    ("", ["hsic", "--x-columns", "a", "--y-columns", "b"]),  # missing values
    ("oops", ["hsic", "--x-columns", "a", "--y-columns", "b"]),  # non-numeric values
])
def test_refusals_carry_no_count_nor_position(tmp_path, bad_value, column_args):
    # 7 and 8 bad rows, at different lines: the messages must be identical (no count, no
    # line number, no value read from the private file).
    messages = []
    for n_bad, first in ((7, 3), (8, 11)):
        lines = ["a,b"] + [f"{i},{i % 3}" for i in range(40)]
        for row in range(first, first + n_bad):
            lines[row + 1] = f"{bad_value},{row % 3}"
        path = tmp_path / "bad.csv"
        path.write_text("\n".join(lines) + "\n")
        code, out, err = _cli([column_args[0], "--file", path, *column_args[1:]], "inproc")
        assert code == 3
        messages.append(err)
    assert messages[0] == messages[1]
    assert "7" not in messages[0] and "8" not in messages[0]


# -- the everyday tests: each subcommand gives the estimator's own result ----------------


def _classical_cases(frame):
    g3 = np.resize(["u", "v", "w"], N)
    frame = frame.assign(g3=g3, cat=np.resize(["x", "y", "z", "x"], N))
    col = frame[["a"]].to_numpy()
    labels = frame[["cat"]].astype(str).to_numpy()
    return frame, [
        (["mannwhitney", "--column", "a", "--group-column", "g", "--alternative", "greater"],
         lambda: skdptest.DPMannWhitneyTest(alternative="greater").fit(
             col, frame["g"].to_numpy())),
        (["kruskal", "--column", "a", "--group-column", "g3", "--n-resamples", 99],
         lambda: skdptest.DPKruskalWallisTest(n_resamples=99).fit(col, g3)),
        (["signedrank", "--column", "a", "--paired-column", "b", "--center", 0.5],
         lambda: skdptest.DPWilcoxonTest(center=0.5).fit(col, frame["b"].to_numpy())),
        (["chi2", "--column", "cat", "--categories", "x", "y", "z",
          "--probabilities", 0.5, 0.25, 0.25],
         lambda: skdptest.DPChiSquareTest(categories=["x", "y", "z"],
                                          probabilities=[0.5, 0.25, 0.25]).fit(labels)),
        (["contingency", "--column", "cat", "--by-column", "g", "--categories", "x", "y", "z",
          "--by-categories", "ctl", "trt"],
         lambda: skdptest.DPContingencyTest(categories=(["x", "y", "z"], ["ctl", "trt"])).fit(
             np.column_stack([labels[:, 0], frame["g"].to_numpy()]))),
    ]


def test_everyday_subcommands_give_the_estimators_result(data, tmp_path):
    _, frame = data
    frame, cases = _classical_cases(frame)
    path = tmp_path / "classical.csv"
    frame.to_csv(path, index=False)
    for args, fit in cases:
        code, out, err = _cli([args[0], "--file", path, *args[1:], "--seed", 9, "--json"],
                              "inprocess")
        assert code == 0, (args, err)
        payload = _json(out)
        with warnings.catch_warnings():  # the same estimator, fitted with the same seed
            warnings.simplefilter("ignore")
            expected = _refit_with_seed(fit, 9)
        assert payload["command"] == args[0]
        assert payload["result_type"] == type(expected).__name__, args
        assert payload["result"] == _expected_fields(expected), args


def _refit_with_seed(fit, seed):
    """Run ``fit`` with every estimator built inside it seeded by ``seed``."""
    original = skdptest._base.BasePrivateTest.fit

    def seeded(self, X, y=None):
        self.set_params(random_state=seed)
        return original(self, X, y)

    skdptest._base.BasePrivateTest.fit = seeded
    try:
        return fit().result_
    finally:
        skdptest._base.BasePrivateTest.fit = original


def test_everyday_subcommands_refuse_bad_input_before_the_charge(data, tmp_path):
    _, frame = data
    frame, _ = _classical_cases(frame)
    path = tmp_path / "classical.csv"
    frame.to_csv(path, index=False)
    ledger = tmp_path / "ledger.sqlite"
    PrivacyBudget(5.0, path=ledger)
    bad = [
        (["chi2", "--column", "cat", "--categories", "x", "y"], 3,
         r"outside the declared categories"),
        (["chi2", "--column", "cat", "--categories", "x", "y", "z", "--probabilities", 1, 2],
         2, r"--probabilities must give one number per category"),
        (["mannwhitney", "--column", "a", "--group-column", "g3"], 3, r"DPMannWhitneyTest"),
    ]
    for args, code, pattern in bad:
        result = _cli([args[0], "--file", path, *args[1:], "--ledger", ledger], "inprocess")
        _assert_one_line_error(*result, code, pattern)
    assert len(PrivacyBudget(5.0, path=ledger)) == 0


def test_help_says_what_the_group_column_may_hold(capsys):
    with pytest.raises(SystemExit):
        main(["mmd", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "two or more distinct values" in text
    assert "--bandwidth" in text and "--kernel" in text and "--method" in text


def test_errors_speak_in_options_not_python():
    from skdptest.cli import _cli_words

    message = ("DPHSICTest needs 9 GiB; routes that fit: kernel_params={'gamma': g} and "
               "y_kernel_params={'gamma': g} (the blocked exact path, cyclic=False), "
               'method="features"; n_permutations=500 is ignored, n_resamples too large')
    words = _cli_words(message)
    for python in ("kernel_params", "cyclic=False", "method=", "n_permutations",
                   "n_resamples"):
        assert python not in words
    for option in ("--bandwidth GAMMA", "--y-bandwidth GAMMA", "--random-permutations",
                   "--method features", "--n-permutations", "--n-resamples"):
        assert option in words


def test_random_permutations_option_reaches_the_estimator(data):
    path, frame = data
    code, out, err = _cli(["hsic", "--file", path, "--x-columns", "a", "--y-columns", "b",
                           "--random-permutations", "--n-permutations", 19, "--seed", 5,
                           "--json"], "inprocess")
    assert code == 0, err
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = DPHSICTest(n_permutations=19, cyclic=False, random_state=5).test(
            frame[["a"]].to_numpy(), frame[["b"]].to_numpy())
    assert _json(out)["result"] == _expected_fields(expected)
    assert _json(out)["result"]["n_permutations"] == 19


@pytest.mark.parametrize("flag, cyclic", [([], "auto"), (["--random-permutations"], False)])
def test_mmd_random_permutations_option_sets_cyclic(data, flag, cyclic):
    # at N = 40 both give random relabellings, so the option is checked on the estimator
    from skdptest import cli

    path, frame = data
    args = cli._parser()[0].parse_args(["mmd", "--file", str(path), "--columns", "a",
                                     "--group-column", "g", *flag])
    est, _, _ = cli._kernel_test(args, frame)
    assert isinstance(est, DPMMDTest) and est.cyclic == cyclic
