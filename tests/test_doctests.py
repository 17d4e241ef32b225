"""The examples in docstrings run (``>>>``), so that they stay true."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

LWM = Path(__file__).resolve().parents[1] / "lwm"
MODULES = sorted(
    ".".join(p.relative_to(LWM.parent).with_suffix("").parts).removesuffix(".__init__")
    for p in LWM.rglob("*.py")
    if ">>> " in p.read_text() and p.name != "controller.py"  # controllers run alone inside the sandbox
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {name} failed"
