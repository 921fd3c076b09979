"""README's one command (issue 29 item 9) runs the example plan and opens its page in the
dashboard: the command is read from README.md and run as written (``.venv/bin/sophon-dsl``
is this interpreter's ``-m sophon_dsl``; ``--port 0`` so that tests never collide; the
browser is a command given in ``BROWSER``, which Python's ``webbrowser`` honours)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
import urllib.request

from .helpers import ROOT, env, stop


def _readme_command() -> list[list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    (line,) = [ln for ln in text.splitlines() if "sophon-dsl ui" in ln and ln.lstrip().startswith(".venv/bin/")]
    parts = []
    for part in line.split("&&"):
        argv = shlex.split(part)
        assert argv[0] == ".venv/bin/sophon-dsl"
        parts.append([sys.executable, "-m", "sophon_dsl", *argv[1:]])
    return parts


def test_the_readme_command_runs_the_example_and_opens_its_page(tmp_path):
    run, ui = _readme_command()
    os.symlink(ROOT / "examples", tmp_path / "examples")
    opened = tmp_path / "opened"
    e = env()
    e["BROWSER"] = f"{sys.executable} -c \"import sys; open({str(opened)!r}, 'w').write(sys.argv[1])\" %s"
    done = subprocess.run(run, cwd=tmp_path, env=e, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    run_id = re.search(r"run id: (\S+)", done.stderr).group(1)
    server = subprocess.Popen([*ui, "--port", "0"], cwd=tmp_path, env=e, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (opened.exists() and opened.read_text()):
            time.sleep(0.1)
        url = opened.read_text()
        assert re.fullmatch(rf"http://127\.0\.0\.1:\d+/runs/{run_id}", url)
        with urllib.request.urlopen(url, timeout=30) as r:
            page = r.read().decode()
        assert run_id in page and 'data-status-of="c5"' in page and "succeeded" in page
    finally:
        stop(server)
