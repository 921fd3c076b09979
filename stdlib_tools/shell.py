"""``shell.run``: run a program (no shell) in the sandbox root. Critical risk; off unless
``StdlibConfig.enable_shell`` is set."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
from typing import Annotated

from typing_extensions import TypedDict

from sophon_dsl.model import Risk
from sophon_dsl.tools import ToolSpec

from ._common import Field, make_tool
from .config import StdlibConfig, uses_config
from .errors import ToolError
from .sandbox import resolve_in_sandbox

__all__ = ["build", "ShellResult"]


class ShellResult(TypedDict):
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool


def _holders(proc: asyncio.subprocess.Process) -> list[int]:
    """Processes (other than us) holding the read ends' pipes of ``proc`` (Linux /proc)."""
    pipes = set()
    for stream in (proc.stdout, proc.stderr):
        transport = getattr(stream, "_transport", None)
        pipe = transport.get_extra_info("pipe") if transport is not None else None
        if pipe is not None:
            try:
                pipes.add(f"pipe:[{os.fstat(pipe.fileno()).st_ino}]")
            except (OSError, ValueError):
                pass
    if not pipes or not os.path.isdir("/proc"):
        return []
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
            if any(os.readlink(f"/proc/{entry}/fd/{fd}") in pipes for fd in fds):
                found.append(int(entry))
        except OSError:
            continue
    return found


@uses_config("sandbox_root", "enable_shell", "shell_timeout", "shell_max_timeout", "shell_max_output")
def build(config: StdlibConfig) -> list[ToolSpec]:
    root = config.root

    async def _drain(proc: asyncio.subprocess.Process) -> tuple[bytes, bytes]:
        """What the killed group wrote.  A descendant that left the group (setsid) still
        holds the pipes and would keep communicate() waiting: it is found by the pipes it
        holds and killed too, and the pipes are closed."""
        try:
            return await asyncio.wait_for(proc.communicate(), 1.0)
        except asyncio.TimeoutError:
            pass
        for pid in _holders(proc):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            return await asyncio.wait_for(proc.communicate(), 1.0)
        except asyncio.TimeoutError:  # not Linux, or hidden from /proc: give up on the output
            for stream in (proc.stdout, proc.stderr):
                transport = getattr(stream, "_transport", None)
                if transport is not None:
                    transport.close()
            await proc.wait()
            return b"", b""

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
            out, err = await _drain(proc)
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
