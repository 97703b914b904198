"""ctest python_pip_install: the package as a user installs it. In a temporary virtual
environment (with the system's site packages, for numpy and scikit-build-core), runs
`pip install --no-build-isolation ./bindings/python` through scikit-build-core, then imports the
package from outside the repository with SPECLA_LIBRARY unset and generates.

By default the install packages the build tree's library (SPECLA_LIBRARY, given by ctest, is
passed to the build and unset afterwards): a few seconds. SPECLA_PIP_FULL_BUILD=1 lets pip build
libspecla from the repository instead, the path of a plain `pip install` (about 150 s of CPU, over
2 minutes of wall time on 2 busy cores: too slow for every CI run).
Exits 77 (skipped) when scikit-build-core or numpy is missing (`pip install scikit-build-core`)."""
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SKIP = 77
REPO = Path(__file__).resolve().parents[3]

missing = [m for m in ("scikit_build_core", "numpy") if importlib.util.find_spec(m) is None]
if missing:
    print(f"SKIPPED: python packages not importable: {', '.join(missing)} "
          f"(pip install scikit-build-core numpy)")
    sys.exit(SKIP)

SMOKE = f"""
import specla, sys
path = specla.library_path()
assert path.startswith(sys.prefix), (path, sys.prefix)  # the copy inside the installed package
m = specla.Model.load({str(REPO / 'models' / 'gdn-pycode-22m')!r}, threads=1)
with specla.Session(m) as s:
    r = specla.generate(s, "def add(a, b):", max_tokens=8)
assert len(r.tokens) == 8 and r.text, r
print("installed package works:", path, repr(r.text))
"""

with tempfile.TemporaryDirectory(prefix="specla-pip-") as tmp:
    venv = Path(tmp) / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("SPECLA_LIBRARY", "PYTHONPATH")}
    build_env = dict(env)
    full = os.environ.get("SPECLA_PIP_FULL_BUILD") == "1" or not os.environ.get("SPECLA_LIBRARY")
    if not full:
        build_env["SPECLA_LIBRARY"] = os.environ["SPECLA_LIBRARY"]
    t0 = time.monotonic()
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--no-build-isolation", "--no-deps", "-C", f"build-dir={tmp}/build",
                    str(REPO / "bindings" / "python")], check=True, env=build_env)
    what = "libspecla built from the repository" if full else "the build tree's libspecla packaged"
    print(f"pip install ({what}) took {time.monotonic() - t0:.0f} s")
    subprocess.run([str(python), "-c", SMOKE], check=True, env=env, cwd=tmp)
    # The server's console script is installed with the package (its options parse before the
    # server extra is imported, so this holds without it too).
    out = subprocess.run([str(venv / "bin" / "specla-server"), "--help"], check=True, env=env,
                         cwd=tmp, capture_output=True, text=True).stdout
    assert "--slots" in out and "--model" in out, out
    print("specla-server is installed")
