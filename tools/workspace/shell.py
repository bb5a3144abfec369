"""``bash`` (``shell.exec:sandbox``): one shell command, always inside the bubblewrap sandbox.

See :mod:`tools.workspace.sandbox` for what the command sees and :mod:`tools.workspace.process`
for how its output and time are bounded. With ``run_in_background`` the command keeps running
after the call as a job of this thread (:mod:`tools.workspace.jobs`).
"""

from __future__ import annotations

from typing import Any

from tools.base import HostTool, ToolContext, ToolError
from tools.workspace import jobs, process
from tools.workspace.roots import thread_workspace
from tools.workspace.sandbox import sandboxed_command, shell_available

__all__ = ["TOOL", "run_bash"]

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
DEFAULT_BACKGROUND_MS = 7_200_000
MAX_BACKGROUND_MS = 86_400_000
MAX_COMMAND_CHARS = 100_000

DESCRIPTION = (
    "Execute a shell command (/bin/sh -c) in a sandbox and return stdout, stderr and the exit code. "
    "The sandbox sees /workspace (this thread's files, the working directory and HOME) and, when the "
    "persona has it, /shared; the system is read-only, there is no network unless persona.yaml allows "
    "it, and every process of the call ends with it. Output is capped to about 100 KB with the start "
    "and end kept; past 8 MB the command is killed. Filter verbose output or write it to a file and "
    "read parts of it. run_in_background: true starts a supervised job and returns job_id, pid and "
    "log_path at once (wait_for with type process and that pid waits for it); do not use & or nohup."
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The shell command to execute."},
        "timeout_ms": {
            "type": "number",
            "description": "Foreground timeout: default 120000, maximum 600000. Background maximum runtime: "
            "default 7200000 (2 hours), maximum 86400000 (24 hours). Larger values are clamped.",
        },
        "run_in_background": {
            "type": "boolean",
            "description": "Start a supervised background process and return immediately. Default false.",
        },
    },
    "required": ["command"],
    "additionalProperties": False,
}


def _timeout(args: dict[str, Any], background: bool) -> float:
    default, ceiling = (
        (DEFAULT_BACKGROUND_MS, MAX_BACKGROUND_MS) if background else (DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS)
    )
    value = args.get("timeout_ms")
    if value is None:
        return default / 1000
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ToolError(
            f"timeout_ms must be a positive number of milliseconds (at most {ceiling}); got {value!r}"
        )
    return min(float(value), ceiling) / 1000


async def run_bash(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """Run ``args["command"]`` in the sandbox; see :data:`DESCRIPTION`."""
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ToolError('command must be a non-empty shell command, e.g. "ls -la /workspace"')
    if len(command) > MAX_COMMAND_CHARS or "\x00" in command:
        raise ToolError(
            f"command must be at most {MAX_COMMAND_CHARS:,} characters without NUL bytes; write a long "
            "script to a file with write_file and run it"
        )
    background = args.get("run_in_background") is True
    timeout = _timeout(args, background)
    sandboxed = sandboxed_command(ctx, command)
    if background:
        owner = (ctx.persona.name, ctx.thread_id)
        if jobs.running_count(owner) >= jobs.MAX_JOBS_PER_THREAD:
            sandboxed.discard()
            raise ToolError(
                f"this thread already runs {jobs.MAX_JOBS_PER_THREAD} background jobs; wait for one to end "
                "(wait_for with type process) before starting another"
            )
        workspace = thread_workspace(ctx.settings, ctx.persona.name, ctx.thread_id)
        job = await jobs.start_job(owner, sandboxed, workspace, timeout)
        return job.status()
    done = await process.run_captured(sandboxed, timeout)
    result: dict[str, Any] = {
        "exit_code": done.exit_code,
        "stdout": done.stdout,
        "stderr": done.stderr,
        "duration_ms": done.duration_ms,
    }
    if done.truncated:
        result["truncated"] = True
        result["output_bytes"] = done.output_bytes
    if done.timed_out:
        result["timed_out"] = True
        result["note"] = (
            f"killed after {timeout * 1000:g} ms (timeout_ms); give a larger timeout_ms (at most "
            f"{MAX_TIMEOUT_MS}) or run it with run_in_background"
        )
    if done.output_limit:
        result["output_limit_exceeded"] = True
        result["note"] = (
            f"killed after more than {process.MAX_OUTPUT_BYTES // (1024 * 1024)} MB of output; redirect the "
            "output to a file (> /workspace/out.txt) and read parts of it"
        )
    return result


TOOL = HostTool(
    mcp_name="bash",
    internal_name="shell.bash",
    prefix="shell.exec",
    description=DESCRIPTION,
    input_schema=SCHEMA,
    handler=run_bash,
    timeout=MAX_TIMEOUT_MS / 1000 + 30,
    available=shell_available,
)
