"""ctest's entry to the Python package's tests: exits 77 (ctest SKIP_RETURN_CODE) with the
reason when numpy or pytest is not importable, else runs the tests with pytest against the
library in SPECLA_LIBRARY (the build tree's, set by the ctest registration)."""
import importlib
import os
import sys
from pathlib import Path

SKIP = 77
HERE = Path(__file__).resolve().parent

missing = []
for name in ("numpy", "pytest"):
    try:
        importlib.import_module(name)
    except ImportError:
        missing.append(name)
if missing:
    print(f"SKIPPED: python packages not importable: {', '.join(missing)} "
          f"(pip install numpy pytest)")
    sys.exit(SKIP)
if not os.environ.get("SPECLA_LIBRARY"):
    print("SPECLA_LIBRARY is not set: the tests would use an installed package's library")

sys.path.insert(0, str(HERE.parent / "src"))  # the package from the source tree
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(HERE.parent / "src")] + [p for p in [os.environ.get("PYTHONPATH")] if p])

import pytest  # noqa: E402

sys.exit(pytest.main([str(HERE), "-q", "-p", "no:cacheprovider", "-rs"]))
