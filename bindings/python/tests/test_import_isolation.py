"""The package next to other C++ extensions in one process: importing torch (or, without it,
NumPy's compiled core) first, then specla, and using both, works; so does the other order.
Each runs in a fresh interpreter (a subprocess), since the order of imports is the point."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from conftest import PYCODE

HAS_TORCH = importlib.util.find_spec("torch") is not None

USE_TORCH = """
import torch
x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
assert float((x @ x.T).sum()) == 83.0
"""
USE_NUMPY = """
import numpy as np
a = np.arange(6, dtype=np.float64).reshape(2, 3)
assert float((a @ a.T).sum()) == 83.0
"""
USE_SPECLA = f"""
import specla
m = specla.Model.load({str(PYCODE)!r}, threads=1)
with specla.Session(m) as s:
    r = specla.generate(s, "def f(x):", max_tokens=6)
    assert len(r.tokens) == 6 and r.text
    s.reset()
    pieces = list(specla.stream(s, "def g(y):", max_tokens=4, stop_at_eos=False))
    assert pieces
m.close()
"""


def _run(code: str) -> None:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]


@pytest.mark.parametrize("first", ["torch", "numpy"])
def test_other_extension_imported_first(first: str) -> None:
    if first == "torch" and not HAS_TORCH:
        pytest.skip("torch is not importable")
    other = USE_TORCH if first == "torch" else USE_NUMPY
    _run(other + USE_SPECLA + other)


def test_specla_imported_first() -> None:
    _run(USE_SPECLA + (USE_TORCH if HAS_TORCH else USE_NUMPY))
