"""``shell.run``: run a program (no shell) in the sandbox root. Critical risk; off unless
``StdlibConfig.enable_shell`` is set."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
from typing import Annotated

from pydantic import Field
from typing_extensions import TypedDict

from sophon_dsl.model import Risk
from sophon_dsl.tools import ToolSpec

from ._common import make_tool
from .config import StdlibConfig
from .errors import ToolError
from .sandbox import resolve_in_sandbox

__all__ = ["build", "ShellResult"]


class ShellResult(TypedDict):
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool


def build(config: StdlibConfig) -> list[ToolSpec]:
    root = config.root

    async def run(command: Annotated[list[str] | str, Field(
                      description="argv list, or a string split like a POSIX shell would "
                                  "(no pipes, globbing or variables: no shell runs)")],
                  cwd: Annotated[str, Field(description="directory inside the sandbox root")] = ".",
                  stdin: str | None = None,
                  timeout: Annotated[float | None, Field(gt=0)] = None) -> ShellResult:
        if not config.enable_shell:
            raise ToolError("Shell.Disabled", "shell.run is disabled (enable_shell=False)")
        try:
            argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
        except ValueError as exc:
            raise ToolError("Shell.InvalidCommand", f"cannot parse command: {exc}") from None
        if not argv:
            raise ToolError("Shell.InvalidCommand", "empty command")
        workdir = resolve_in_sandbox(root, cwd)
        if not workdir.is_dir():
            raise ToolError("Files.NotADirectory", f"{cwd!r} is not a directory")
        limit = min(float(timeout or config.shell_timeout), config.shell_max_timeout)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root),
               "LANG": os.environ.get("LANG", "C.UTF-8"), "PWD": str(workdir)}
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=str(workdir), env=env, start_new_session=True,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        except FileNotFoundError:
            raise ToolError("Shell.NotFound", f"program not found: {argv[0]!r}") from None
        except PermissionError:
            raise ToolError("Shell.PermissionDenied", f"cannot execute {argv[0]!r}") from None
        timed_out = False
        try:
            out, err = await asyncio.wait_for(
                proc.communicate(stdin.encode() if stdin is not None else None), limit)
        except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = await proc.communicate()
            if isinstance(exc, asyncio.CancelledError):
                raise
        cap = config.shell_max_output
        truncated = len(out) > cap or len(err) > cap
        return ShellResult(exit_code=None if timed_out else proc.returncode,
                           stdout=out[:cap].decode(errors="replace"),
                           stderr=err[:cap].decode(errors="replace"),
                           timed_out=timed_out, truncated=truncated)

    return [make_tool(run, "shell.run", Risk.CRITICAL,
                      "Run a program (argv, no shell) with its working directory inside the sandbox "
                      "root and a timeout. Critical risk; available only when enabled in configuration.")]
