"""ctest's entry to the drafter tool's tests: exits 77 (ctest SKIP_RETURN_CODE) with the reason
when a package they need is not importable, else runs them with pytest."""
import importlib
import sys
from pathlib import Path

SKIP = 77
HERE = Path(__file__).resolve().parent

missing = []
for name in ("torch", "numpy", "safetensors", "pytest"):
    try:
        importlib.import_module(name)
    except ImportError:
        missing.append(name)
if missing:
    print(f"SKIPPED: python packages not importable: {', '.join(missing)} "
          f"(pip install -r {HERE.parent / 'requirements.txt'})")
    sys.exit(SKIP)

import pytest  # noqa: E402

sys.exit(pytest.main([str(HERE), "-q", "-p", "no:cacheprovider"]))
