"""Background children from their parent's side, and a child's progress reports.

``cancel_background_job``, ``get_background_job_health`` and ``send_message_to_agent`` need
``jobs.manage`` and reach only jobs this conversation's persona started with ``agent`` in
background mode. ``emit_progress`` needs ``agent.progress``, which only a child started with
``progress_events: true`` holds.
"""

from __future__ import annotations

import json
import time
from typing import Any

from gateway.children import jobs
from tools.agents.common import children
from tools.base import HostTool, ToolContext, ToolError

MAX_PROGRESS_BYTES = 2048
MAX_PHASE_CHARS = 64
MAX_METADATA_BYTES = 4096


async def cancel(ctx: ToolContext, args: dict[str, Any]) -> Any:
    service = children(ctx)
    return await jobs.cancel_job(
        service.delegation,
        job_id=args["jobId"],
        reason=args["reason"],
        origin_thread_id=ctx.thread_id,
        persona=ctx.persona.name,
    )


async def health(ctx: ToolContext, args: dict[str, Any]) -> Any:
    service = children(ctx)
    return await jobs.job_health(
        service.delegation, job_id=args["jobId"], origin_thread_id=ctx.thread_id, persona=ctx.persona.name
    )


async def steer(ctx: ToolContext, args: dict[str, Any]) -> Any:
    service = children(ctx)
    return await jobs.steer_job(
        service.delegation,
        job_id=args["jobId"],
        message=args["message"],
        origin_thread_id=ctx.thread_id,
        persona=ctx.persona.name,
    )


async def progress(ctx: ToolContext, args: dict[str, Any]) -> Any:
    message, phase, metadata = args["message"], args.get("phase"), args.get("metadata")
    size = len(message.encode("utf-8", "surrogatepass"))
    if size > MAX_PROGRESS_BYTES:
        raise ToolError(f"message is {size} bytes; the limit is {MAX_PROGRESS_BYTES}: send a shorter status")
    if metadata is not None:
        encoded = len(json.dumps(metadata, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))
        if encoded > MAX_METADATA_BYTES:
            raise ToolError(
                f"metadata is {encoded} bytes as JSON; the limit is {MAX_METADATA_BYTES}: keep a few small values"
            )
    service = children(ctx)
    if ctx.run_id is not None and service.is_foreground(ctx.run_id):
        event = {"message": message, "phase": phase, "metadata": metadata, "at": time.time()}
        service.progress(ctx.run_id, event)
        return {"delivered": "to the parent, with your result"}
    job_id = await ctx.db.run_transaction(jobs.add_progress, ctx.thread_id, message, phase, metadata)
    if job_id is None:
        raise ToolError(
            "emit_progress works only in a child agent started with progress_events: true; "
            "report in your answer instead"
        )
    return {"delivered": "to the parent's job health", "jobId": job_id}


_JOB_ID = {"type": "string", "minLength": 1, "maxLength": 64, "description": "The jobId agent returned."}

CANCEL = HostTool(
    mcp_name="cancel_background_job",
    internal_name="jobs.cancel",
    prefix="jobs.manage",
    description=(
        "Cancel a background child agent that this conversation started with agent (mode background). "
        "The reason is recorded. A job that already finished is reported, not an error."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "jobId": _JOB_ID,
            "reason": {
                "type": "string",
                "minLength": 1,
                "maxLength": 500,
                "description": "Why the job should stop (recorded).",
            },
        },
        "required": ["jobId", "reason"],
        "additionalProperties": False,
    },
    handler=cancel,
)

HEALTH = HostTool(
    mcp_name="get_background_job_health",
    internal_name="jobs.health",
    prefix="jobs.manage",
    description=(
        "Inspect a background child agent of this conversation: state, elapsedMs, lastActivityAt, "
        "idleSinceMs while running, pending steering messages, its last progress events and last output "
        "lines. Its result is posted here when it ends: do not poll for it."
    ),
    input_schema={
        "type": "object",
        "properties": {"jobId": _JOB_ID},
        "required": ["jobId"],
        "additionalProperties": False,
    },
    handler=health,
)

STEER = HostTool(
    mcp_name="send_message_to_agent",
    internal_name="jobs.steer",
    prefix="jobs.manage",
    description=(
        "Steer a running background child agent of this conversation: the message is kept durably and the "
        f"child reads it as a user message at its next tool-call boundary (at most {jobs.MAX_STEERING_BYTES:,} "
        "bytes). A finished job cannot be steered."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "jobId": _JOB_ID,
            "message": {"type": "string", "minLength": 1, "description": "Steering text for the child."},
        },
        "required": ["jobId", "message"],
        "additionalProperties": False,
    },
    handler=steer,
)

PROGRESS = HostTool(
    mcp_name="emit_progress",
    internal_name="agent.progress",
    prefix="agent.progress",
    description=(
        "Report your progress to the agent that started you (offered because it asked for progress_events). "
        "A foreground parent sees the events with your result; a background job's parent sees the last 20 "
        f"in get_background_job_health. message at most {MAX_PROGRESS_BYTES} bytes."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "message": {"type": "string", "minLength": 1, "description": "Current status, free text."},
            "phase": {"type": "string", "maxLength": MAX_PHASE_CHARS, "description": "Short stage label."},
            "metadata": {
                "type": "object",
                "description": f"Small key/value data (≤ {MAX_METADATA_BYTES} bytes as JSON).",
            },
        },
        "required": ["message"],
        "additionalProperties": False,
    },
    handler=progress,
)
