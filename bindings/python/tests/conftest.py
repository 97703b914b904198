"""Fixtures of the specla package's tests.

The library comes from SPECLA_LIBRARY (ctest sets it to the build tree's) or from the installed
package. The C API's own output comes from the `specla` CLI: SPECLA_CLI, else build/samples/specla
of the repository; the tests that compare against it are skipped without one.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import List, Optional

import pytest

import specla

REPO = Path(__file__).resolve().parents[3]
PYCODE = REPO / "models" / "gdn-pycode-22m"
PYCODE_EAGLE = REPO / "models" / "gdn-pycode-22m-eagle"
FIXTURES = REPO / "tests" / "fixtures"
# Arbitrary in-vocabulary ids, as tests/api/test_pycode.cpp uses.
PROMPT_IDS = [0, 318, 1207, 7, 42, 2650, 11, 902, 15, 4100, 3, 77]
PROMPT_TEXT = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"


@pytest.fixture(scope="session")
def model() -> specla.Model:
    m = specla.Model.load(PYCODE, threads=1)
    yield m
    m.close()


@pytest.fixture
def session(model: specla.Model) -> specla.Session:
    with specla.Session(model) as s:
        yield s


def cli_path() -> Optional[Path]:
    env = os.environ.get("SPECLA_CLI")
    if env:
        return Path(env)
    p = REPO / "build" / "samples" / "specla"
    return p if p.exists() else None


class Cli:
    """`specla generate` of the C API, for reference outputs."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def run(self, *args: str) -> str:
        env = dict(os.environ)
        if os.environ.get("SPECLA_LIBRARY"):  # the same library the package loads
            env["LD_LIBRARY_PATH"] = str(Path(os.environ["SPECLA_LIBRARY"]).parent)
        out = subprocess.run([str(self.path), "generate", "--model", str(PYCODE), "--quiet",
                              "--threads", "1", *args], check=True, capture_output=True,
                             env=env)
        return out.stdout.decode("utf-8")

    def tokens(self, prompt: List[int], *args: str) -> List[int]:
        text = self.run("--tokens", ",".join(map(str, prompt)), *args).strip()
        return [int(t) for t in text.split(",")] if text else []

    def text(self, prompt: str, *args: str) -> str:
        out = self.run("--prompt", prompt, *args)
        assert out.endswith("\n")  # the CLI ends the stream with a newline
        return out[:-1]


@pytest.fixture(scope="session")
def cli() -> Cli:
    p = cli_path()
    if p is None or not p.exists():
        pytest.skip("no specla CLI (set SPECLA_CLI or build build/samples/specla)")
    return Cli(p)
