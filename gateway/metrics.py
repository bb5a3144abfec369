"""The process's Prometheus metrics: counters and histograms incremented where each thing
happens, in one registry of Talon's own (not the library's global one).

Labels are names from the config (channel, persona, provider:model, tool) and fixed outcome
words, never ids or content, so their number stays bounded. The gauges that describe stored
state (queue, outbox, dead letters, usage) are read at scrape time by
:mod:`gateway.http.metrics`; counting here costs a dict lookup and an add.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

__all__ = [
    "INTAKE_EVENTS",
    "MODEL_CALLS",
    "MODEL_SECONDS",
    "OUTBOX_SENDS",
    "OUTBOX_SEND_SECONDS",
    "REGISTRY",
    "TOKENS",
    "TOOL_CALLS",
    "TURNS",
    "TURN_COST",
    "TURN_SECONDS",
    "WEBHOOK_DELIVERIES",
    "WRITE_CONFLICTS",
]

REGISTRY = CollectorRegistry(auto_describe=True)

# Model calls and turns take seconds to minutes; sends take milliseconds to seconds.
_SLOW = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600)
_FAST = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

INTAKE_EVENTS = Counter(
    "talon_intake_events",
    "Inbound platform events by channel and what intake did with them "
    "(accepted: a turn queued; stored: kept without a turn; duplicate; unrouted)",
    ["channel", "outcome"],
    registry=REGISTRY,
)
TURNS = Counter(
    "talon_turns",
    "Turns that ended, by persona and outcome (completed, retried, dead, canceled)",
    ["persona", "outcome"],
    registry=REGISTRY,
)
TURN_SECONDS = Histogram(
    "talon_turn_duration_seconds",
    "Time from a turn's lease to its end",
    ["persona"],
    buckets=_SLOW,
    registry=REGISTRY,
)
MODEL_CALLS = Counter(
    "talon_model_calls",
    "Model calls by model and outcome (ok, error)",
    ["model", "outcome"],
    registry=REGISTRY,
)
MODEL_SECONDS = Histogram(
    "talon_model_call_duration_seconds",
    "Time of one model call",
    ["model"],
    buckets=_SLOW,
    registry=REGISTRY,
)
TOKENS = Counter(
    "talon_tokens",
    "Tokens of completed turns by persona, model and kind (input, output)",
    ["persona", "model", "kind"],
    registry=REGISTRY,
)
TURN_COST = Counter(
    "talon_cost",
    "Cost of completed turns at the configured prices, in the configured currency",
    ["persona", "model"],
    registry=REGISTRY,
)
TOOL_CALLS = Counter(
    "talon_tool_calls",
    "Tool call decisions and results at the bridge, by tool, decision (allowed, refused, "
    "approval, result) and status (ok, error, timeout, approved, denied; empty when none)",
    ["tool", "decision", "status"],
    registry=REGISTRY,
)
OUTBOX_SENDS = Counter(
    "talon_outbox_sends",
    "Outbound chunks and files settled, by channel and outcome (sent, retried, failed, unknown)",
    ["channel", "outcome"],
    registry=REGISTRY,
)
OUTBOX_SEND_SECONDS = Histogram(
    "talon_outbox_send_duration_seconds",
    "Time of one platform send call",
    ["channel"],
    buckets=_FAST,
    registry=REGISTRY,
)
WEBHOOK_DELIVERIES = Counter(
    "talon_webhook_deliveries",
    "Inbound webhook requests by route and the HTTP status answered (202, 400, 401, 429, 503)",
    ["route", "status"],
    registry=REGISTRY,
)
WRITE_CONFLICTS = Counter(
    "talon_write_conflicts",
    "Write transactions run again because another node's transaction conflicted (PostgreSQL clusters)",
    registry=REGISTRY,
)
