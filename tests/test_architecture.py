"""The package's dependency rules, checked on its import graph (doc/contributing.md).

- the core (``skdptest/_*.py``) imports no family, no baseline and not the front;
- a family (``classical``, ``evalue``, ``kernel``, ``threshold``) imports the core and itself only;
- baselines may import the core and the families, never the front;
- nothing shipped imports ``tests``, ``benchmarks`` or ``examples``;
- nothing imports a private scikit-learn module.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "skdptest"
FAMILIES = {"classical", "evalue", "kernel", "threshold"}

# Which groups each group may import.
ALLOWED = {
    "core": {"core"},
    "family": {"core"},  # and its own family
    "baselines": {"core", "family", "baselines"},
    "front": {"core", "family", "baselines", "front"},
}


def _module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path):
    """Absolute names of the modules ``path`` imports (relative imports resolved)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            for alias in node.names:  # `from . import x` may import a submodule
                sub = f"{target}.{alias.name}"
                yield sub if _is_module(sub) else target


def _group(module):
    """(group, family) of a skdptest module, or None for other packages."""
    parts = module.split(".")
    if parts[0] != "skdptest":
        return None
    if len(parts) == 1 or parts[1] in ("__main__", "__init__"):
        return "front", None
    if parts[1] in FAMILIES:
        return "family", parts[1]
    if parts[1] == "baselines":
        return "baselines", None
    if parts[1].startswith("_"):
        return "core", None
    return "front", None  # a public top-level module (e.g. skdptest.audit)


def _is_module(name):
    rel = Path(*name.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").exists() or (PACKAGE / rel / "__init__.py").exists()


def _allowed(src, dst):
    if src == dst:
        return True
    if src[0] == "family":
        return dst[0] == "core"
    return dst[0] in ALLOWED[src[0]]


def _violations(path):
    src = _group(_module_name(path))
    out = []
    for target in _imports(path):
        top = target.split(".")[0]
        if top in ("tests", "benchmarks", "examples"):
            out.append(f"{target} (shipped code never imports {top})")
        elif top == "sklearn" and any(p.startswith("_") for p in target.split(".")[1:]):
            out.append(f"{target} (private scikit-learn module)")
        elif top == "skdptest" and _is_module(target):
            dst = _group(target)
            if not _allowed(src, dst):
                out.append(f"{target} ({src[0]} -> {dst[0]} {dst[1] or ''})".rstrip())
    return out


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_imports_follow_the_dependency_rules(path):
    assert _violations(path) == []


def test_the_rules_catch_forbidden_arrows(tmp_path):
    # A core module importing a family, and a family importing another family, are caught.
    global PACKAGE
    fake = tmp_path / "skdptest"
    for sub in ("", "evalue", "kernel"):
        (fake / sub).mkdir(exist_ok=True)
        (fake / sub / "__init__.py").write_text("")
    (fake / "_core.py").write_text("from .evalue import x\n")
    (fake / "kernel" / "_k.py").write_text("from ..evalue import x\nfrom .._core import y\n")
    (fake / "evalue" / "_e.py").write_text("import tests._toy\nfrom sklearn.utils._x import z\n")
    PACKAGE = fake
    try:
        assert _violations(fake / "_core.py") == ["skdptest.evalue (core -> family evalue)"]
        assert _violations(fake / "kernel" / "_k.py") == [
            "skdptest.evalue (family -> family evalue)"]
        assert len(_violations(fake / "evalue" / "_e.py")) == 2
    finally:
        PACKAGE = Path(__file__).resolve().parents[1] / "skdptest"
