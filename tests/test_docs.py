"""Every ```python block of README.md and doc/*.md runs, and the API reference is complete.

Each block runs on its own, in a fresh namespace, with a temporary directory as the
working directory: a page's snippets must be self-contained (the imports and data they
use are in the block), so a reader can paste any one of them. Blocks written as a doctest
session (lines starting with ``>>>``) are run with :mod:`doctest`, so their printed
outputs are checked too. Text that is deliberately not runnable is fenced as ```text or
```console instead. The Sphinx build itself (``python -m sphinx -W``) is a separate CI
step (``.ci/run``).
"""

import doctest
import importlib
import re
from pathlib import Path

import pytest

import skdptest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "doc").glob("*.md")),
         *sorted((ROOT / "doc" / "user_guide").glob("*.md"))]

# Blocks that take more than a few seconds, as (page name, a string in the block).
SLOW_BLOCKS = {
    ("audit.md", "n_trials=2000"),  # 4000 fits, about 6 s
    ("power.md", "n_repeats=200"),  # 1200 dpMMD fits up to n = 500, about 2 min
    # Blocks that repeat what a default test runs (slow here, to run each once):
    # the 100 spends of test_budget_accountants::test_hundred_adaptive_tests_fit_under_zcdp...
    ("privacy_budget.md", 'print("the 101st does not fit")'),
    # 10 releases of a confidence sequence (~1 s); tests/evalue/test_confseq.py fits streams
    # through partial_fit and reads intervals_ by default
    ("confidence_sequences.md", "cs.intervals_"),
}

_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)


def python_blocks(text):
    """Return ``(line, source)`` of every fenced block whose info string is ``python``.

    Parameters
    ----------
    text : str
        Markdown source.

    Returns
    -------
    list of tuple of (int, str)
        The 1-based line of the opening fence and the block's source.
    """
    blocks = []
    for m in _FENCE.finditer(text):
        if m.group("info").strip().split(" ")[0] in ("python", "py", "pycon"):
            blocks.append((text.count("\n", 0, m.start()) + 1, m.group("body")))
    return blocks


def _cases():
    cases = []
    for page in PAGES:
        for line, src in python_blocks(page.read_text(encoding="utf-8")):
            slow = any(page.name == name and key in src for name, key in SLOW_BLOCKS)
            # README's blocks with imports: test_main.py::test_readme_example_runs runs
            # each of them by default and checks what they print
            slow = slow or (page.name == "README.md" and "import" in src)
            marks = [pytest.mark.slow] if slow else []
            cases.append(pytest.param(page, line, src, marks=marks,
                                      id=f"{page.relative_to(ROOT)}:{line}"))
    return cases


def test_pages_have_python_blocks():
    # The collection below must not silently find nothing (a broken fence regex would
    # turn every page test into a pass).
    found = {p.name for p in PAGES if python_blocks(p.read_text(encoding="utf-8"))}
    assert {"README.md", "privacy_budget.md", "evalues.md", "kernel_tests.md",
            "gtm.md"} <= found


def test_python_blocks_parser():
    text = "a\n```python\nx = 1\n```\n```text\nnot code\n```\n```\nplain\n```\n"
    assert python_blocks(text) == [(2, "x = 1\n")]


@pytest.mark.parametrize(("page", "line", "src"), _cases())
def test_python_block_runs(page, line, src, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # Figures of a block must not open windows or need a display. Set through the
    # environment: matplotlib is not a test dependency, and a block that needs it imports it.
    monkeypatch.setenv("MPLBACKEND", "Agg")
    name = f"{page.name}:{line}"
    if src.lstrip().startswith(">>>"):
        test = doctest.DocTestParser().get_doctest(src, {}, name, str(page), line)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS
                                       | doctest.NORMALIZE_WHITESPACE)
        runner.run(test)
        result = runner.summarize(verbose=False)
        assert result.attempted > 0
        assert result.failed == 0, f"doctest block at {name} failed (see output above)"
    else:
        # Pad with blank lines so that tracebacks give the line number in the page.
        code = compile("\n" * line + src, str(page), "exec")
        exec(code, {"__name__": "__docs__"})


def _api_names():
    """Return the names listed in the autosummary tables of doc/api.rst, per module."""
    text = (ROOT / "doc" / "api.rst").read_text(encoding="utf-8")
    names = {}
    module = None
    for ln in text.splitlines():
        m = re.match(r"\.\. currentmodule:: (\S+)", ln)
        if m:
            module = m.group(1)
            continue
        m = re.match(r"\.\. data:: (\S+)", ln)
        if m:
            names.setdefault(module, set()).add(m.group(1))
            continue
        m = re.match(r"   ([A-Za-z_][A-Za-z0-9_]*)$", ln)
        if m and module is not None:
            names.setdefault(module, set()).add(m.group(1))
    return names


@pytest.mark.parametrize("module", ["skdptest", "skdptest.threshold",
                                    "skdptest.baselines", "skdptest.audit",
                                    "skdptest.power"])
def test_api_reference_lists_every_public_name(module):
    listed = _api_names()
    # A name re-exported at the top level is documented once, under skdptest.
    documented = listed.get(module, set()) | (
        listed.get("skdptest", set()) if module != "skdptest" else set())
    missing = set(importlib.import_module(module).__all__) - documented
    assert not missing, f"doc/api.rst lacks {sorted(missing)} from {module}.__all__"
    assert skdptest.__all__  # the front exports something to document
