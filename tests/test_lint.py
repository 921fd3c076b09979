"""The repository is clean under its own ruff configuration (pyproject.toml ``[tool.ruff]``):
a finding fails the suite here, with ruff's report as the message, instead of waiting for review."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_check_is_clean():
    # ruff is in the [test] extra: a missing ruff is a broken test environment, not a reason to skip
    assert importlib.util.find_spec("ruff") is not None, \
        "ruff is not installed: install the test extra (pip install -e '.[test]')"
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"ruff check found problems:\n{proc.stdout}{proc.stderr}"
