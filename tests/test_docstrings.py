"""numpydoc validation of every public name (issue 20, item 6).

Every class and function of ``skdptest.__all__`` and of the public modules'
``__all__`` (those ``doc/api.rst`` documents) must have a docstring (GL08) with a
summary (SS01), an Examples section (EX01; the examples run as doctests with
``--doctest-modules``), every parameter documented with a description (PR01, PR02,
PR07) and, for a function that returns something, a Returns section (RT01).

A frozen result dataclass documents its fields under ``Attributes`` (its "parameters"
are its fields): for classes, PR01 and PR02 are checked against the union of the
Parameters and Attributes sections.
"""

import dataclasses
import importlib
import inspect

import numpydoc.validate as numpydoc_validate
import pytest
from numpydoc.docscrape import ClassDoc
from numpydoc.docscrape_sphinx import get_doc_object


class _Validator(numpydoc_validate.Validator):
    """numpydoc's validator without the source-file lookup.

    numpydoc reads the object's file and line only to honour ``# numpydoc ignore``
    comments and to report where an error is; finding a class's line re-parses its
    module, about 20 ms per object. The package has no such comments, and without the
    lookup they would not silence a check: the validation is the same or stricter.
    """

    def __init__(self, obj_name):
        super().__init__(get_doc_object(self._load_obj(obj_name)))

    @property
    def source_file_name(self):
        return None

    @property
    def source_file_def_line(self):
        return None

#: The public modules (the same list as tests/test_docs.py's API-reference check).
PUBLIC_MODULES = ("skdptest", "skdptest.threshold", "skdptest.baselines", "skdptest.audit",
                  "skdptest.power")

#: The checks enforced (numpydoc's codes).
CHECKS = {
    "GL08": "no docstring",
    "SS01": "no summary",
    "EX01": "no Examples section",
    "PR01": "parameters not documented",
    "PR02": "documented parameters that do not exist",
    "PR07": "a parameter without a description",
    "RT01": "no Returns section",
}


def _public_names():
    """(qualified name, object) of every public class and function, each object once
    (a name re-exported at the top level is checked under ``skdptest``)."""
    seen, out = set(), []
    for module in PUBLIC_MODULES:
        mod = importlib.import_module(module)
        for name in mod.__all__:
            obj = getattr(mod, name)
            if not (inspect.isclass(obj) or callable(obj)) or id(obj) in seen:
                continue  # a constant (RATE_CAP_FACTOR) is documented in doc/api.rst
            seen.add(id(obj))
            out.append((f"{module}.{name}", obj))
    return out


PUBLIC = _public_names()


def _documented_fields(obj):
    """Names in the Parameters and Attributes sections of ``obj`` and of its bases (a
    result documents the fields it adds; ``TestResult`` documents the common ones)."""
    out = set()
    for cls in inspect.getmro(obj):
        if cls.__module__.split(".")[0] != "skdptest":
            continue
        doc = ClassDoc(cls, config={"show_class_members": False})
        out |= {name.strip() for p in doc["Parameters"] + doc["Attributes"]
                for name in p.name.split(",") if name.strip()}
    return out


def _class_parameter_errors(obj):
    """PR01/PR02 for a class: its constructor's parameters (a dataclass: its fields)
    against its (and its bases') Parameters and Attributes sections."""
    if dataclasses.is_dataclass(obj):
        expected = {f.name for f in dataclasses.fields(obj) if f.init}
    else:
        try:
            signature = inspect.signature(obj)
        except (TypeError, ValueError):
            return []
        expected = {n for n, p in signature.parameters.items()
                    if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    documented = _documented_fields(obj)
    errors = []
    if expected - documented:
        errors.append(("PR01", f"not documented: {sorted(expected - documented)}"))
    if issubclass(obj, BaseException) or dataclasses.is_dataclass(obj):
        return errors  # Attributes may also list derived properties
    params = {name.strip() for p in ClassDoc(obj, config={"show_class_members": False})[
        "Parameters"] for name in p.name.split(",")}
    if params - expected:
        errors.append(("PR02", f"documented but not parameters: {sorted(params - expected)}"))
    return errors


def test_every_public_name_is_checked():
    names = {q.rsplit(".", 1)[1] for q, _ in PUBLIC}
    assert {"PrivateEValueTest", "PrivacyBudget", "grey_box_audit", "solve_n",
            "DPSPRT", "gtm_p_bar"} <= names


@pytest.mark.parametrize("qualname, obj", PUBLIC, ids=[q for q, _ in PUBLIC])
def test_numpydoc(qualname, obj):
    result = numpydoc_validate.validate(qualname, validator_cls=_Validator)
    errors = [(code, msg) for code, msg in result["errors"] if code in CHECKS]
    if inspect.isclass(obj):
        errors = [e for e in errors if e[0] not in ("PR01", "PR02", "RT01")]
        errors += _class_parameter_errors(obj)
    assert not errors, "\n".join(f"{code} ({CHECKS[code]}): {msg}" for code, msg in errors)
