"""Shared by the two conformance runners: collecting the cases of a YAML corpus."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml


def collect_cases(corpus: Path, prefix: str = "") -> list:
    """One ``pytest.param(file name, file tools, case)`` per case, id ``"<prefix><file>::<name>"``;
    a case with ``xfail: reason`` is a strict expected failure."""
    params = []
    for path in sorted(corpus.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        file_tools = doc.get("tools") or {}
        for case in doc.get("cases") or []:
            case_id = f"{prefix}{path.name}::{case.get('name')}"
            marks = []
            if case.get("xfail"):
                marks.append(pytest.mark.xfail(strict=True, reason=str(case["xfail"])))
            params.append(pytest.param(path.name, file_tools, case, id=case_id, marks=marks))
    return params
