"""The memory built-ins: ``memory-retriever`` and ``memory-groomer``.

Both read only the calling thread's memory items; the model never sees another thread's.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from gateway.store import memory
from gateway.subagents.base import Invocation, SubagentError, SubagentResult, limit_input, text_input

__all__ = ["KEYWORD_ENOUGH", "groom_memory", "keyword_terms", "retrieve_memory"]

# With this many keyword matches or fewer, the matches are the answer: no model call.
KEYWORD_ENOUGH = 3
MAX_ITEMS = 1000
MAX_MODEL_ITEMS = 150
MAX_VALUE_CHARS = 1500
MAX_QUERY_CHARS = 2000
MAX_KEY_CHARS = 200
MAX_VALUE_BYTES = 64 * 1024

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOPWORDS = frozenset(
    "a an and are as at be by did do does for from has have how i in is it me my of on or our "
    "the their them there this to was we were what when where which who why will with you your".split()
)


@dataclass(frozen=True, slots=True)
class MemoryItem:
    key: str
    namespace: str
    value: str
    updated_at: float

    def shown(self) -> dict[str, str]:
        value = self.value if len(self.value) <= MAX_VALUE_CHARS else self.value[:MAX_VALUE_CHARS] + "…"
        return {"key": self.key, "namespace": self.namespace, "value": value}


async def _items(call: Invocation, *, include_summaries: bool = True) -> list[MemoryItem]:
    rows = await call.db.read(memory.list_items, call.thread_id, limit=MAX_ITEMS, summaries=include_summaries)
    return [MemoryItem(r.key, r.kind, r.value, r.updated_at) for r in rows]


# ---------------------------------------------------------------- keyword pass


def _stem(word: str) -> str:
    """A light English stemmer: enough for "invoices" to find "invoice" and "sending" "send"."""
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    if len(word) > 4 and word.endswith(("ses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def keyword_terms(text: str) -> set[str]:
    """The searchable words of ``text``: lower-cased, stemmed, without stop words."""
    return {_stem(w) for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in _STOPWORDS}


def _score(item: MemoryItem, terms: set[str]) -> int:
    """Matched query terms; a match in the key counts double."""
    key_words = keyword_terms(item.key)
    value_words = keyword_terms(item.value)
    return sum(2 if t in key_words else 1 if t in value_words else 0 for t in terms)


# ---------------------------------------------------------------- memory-retriever


async def retrieve_memory(call: Invocation) -> SubagentResult:
    """Rank this thread's memory items by relevance to ``input.query``.

    A keyword pass runs first; when it finds between one and :data:`KEYWORD_ENOUGH` items,
    those are the answer and the model is not called. Otherwise the model ranks the
    keyword matches (or every item, when no keyword matched).

    Input: ``query`` (required), ``limit`` (default 5, at most 50).
    Data: ``{"items": [{key, namespace, value, relevance, reason?}], "method": "keyword"|"model"}``.
    """
    query = text_input(call, "query", MAX_QUERY_CHARS)
    limit = limit_input(call, 5, 50)
    items = await _items(call)
    if not items:
        return call.result("this thread has no memory items", {"items": [], "method": "keyword"})
    terms = keyword_terms(query)
    scored = sorted(
        ((s, item) for item in items if (s := _score(item, terms)) > 0),
        key=lambda pair: (-pair[0], -pair[1].updated_at),
    )
    if 0 < len(scored) <= KEYWORD_ENOUGH:
        best = max(s for s, _ in scored)
        found = [{**item.shown(), "relevance": round(s / best, 2)} for s, item in scored[:limit]]
        return call.result(_found(found, "keyword match"), {"items": found, "method": "keyword"})
    candidates = [item for _, item in scored] if scored else items
    candidates = candidates[:MAX_MODEL_ITEMS]
    content = f"Query: {query}\n\nReturn at most {limit} items.\n\nMemory items:\n" + json.dumps(
        [c.shown() for c in candidates], ensure_ascii=False, indent=1
    )
    outcome = await call.complete(content)
    by_key = {c.key: c for c in candidates}
    found = []
    for entry in outcome.data["items"]:
        item = by_key.pop(entry["key"], None)  # unknown keys are invented: dropped; pop skips repeats
        if item is None:
            continue
        shown: dict[str, Any] = {**item.shown(), "relevance": entry.get("relevance")}
        if entry.get("reason"):
            shown["reason"] = entry["reason"]
        found.append(shown)
        if len(found) == limit:
            break
    return call.result(_found(found, "ranked by the model"), {"items": found, "method": "model"})


def _found(items: list[dict[str, Any]], how: str) -> str:
    if not items:
        return "no relevant memory items"
    keys = ", ".join(i["key"] for i in items[:5]) + (", …" if len(items) > 5 else "")
    return f"{len(items)} relevant memory item{'s' if len(items) != 1 else ''} ({how}): {keys}"


# ---------------------------------------------------------------- memory-groomer


async def groom_memory(call: Invocation) -> SubagentResult:
    """Merge and prune this thread's memory items (``summary`` items are left alone).

    The merged items are written before the old ones are deleted, in one transaction, so a
    failure at any point leaves every old item in place.

    Input: ``instructions`` (optional text, e.g. what to keep).
    Data: ``{"written": [keys], "deleted": [keys], "summary": str}``.
    """
    instructions = call.input.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise SubagentError("input.instructions must be text")
    items = (await _items(call, include_summaries=False))[:MAX_MODEL_ITEMS]
    if len(items) < 2:
        data = {"written": [], "deleted": [], "summary": "nothing to groom"}
        return call.result(f"nothing to groom: this thread has {len(items)} memory items", data)
    listed = {i.key for i in items}
    protected = await call.db.read(memory.keys_of_kind, call.thread_id, "summary")

    def check(data: dict[str, Any]) -> str | None:
        merged_keys = [m["key"] for m in data["merged"]]
        if len(set(merged_keys)) != len(merged_keys):
            return "each key may appear only once in merged"
        named = {k for m in data["merged"] for k in m["replaces"]} | set(data["delete"])
        unknown = sorted(named - listed)
        if unknown:
            return f"replaces and delete may name only keys from the list; unknown: {', '.join(unknown[:10])}"
        clash = sorted(set(merged_keys) & protected)
        if clash:
            return f"merged may not use the key {clash[0]!r}, which holds the conversation summary"
        if len(merged_keys) > len(items):
            return "merged must not hold more items than the list it consolidates"
        return None

    content = (
        (f"Instructions: {instructions.strip()}\n\n" if instructions and instructions.strip() else "")
        + "Memory items:\n"
        + json.dumps([i.shown() for i in items], ensure_ascii=False, indent=1)
    )
    outcome = await call.complete(content, check=check)
    data = outcome.data
    kinds = {i.key: i.namespace for i in items}
    writes = []
    for m in data["merged"]:
        value = m["value"]
        if len(value.encode("utf-8")) > MAX_VALUE_BYTES:
            raise SubagentError(
                f"memory-groomer produced a value over {MAX_VALUE_BYTES} bytes for {m['key']!r}"
            )
        first = next(iter(m["replaces"]), None)
        kind = m.get("namespace") or kinds.get(m["key"]) or kinds.get(first or "", "note")
        writes.append((m["key"], kind, value))
    written = {key for key, _, _ in writes}
    doomed = sorted(({k for m in data["merged"] for k in m["replaces"]} | set(data["delete"])) - written)
    deleted = await call.db.run_transaction(lambda conn: _apply(conn, call, writes, doomed))
    summary = data["summary"].strip() or "memory groomed"
    return call.result(
        f"{summary} (wrote {len(writes)}, deleted {len(deleted)})",
        {"written": [k for k, _, _ in writes], "deleted": deleted, "summary": summary},
    )


def _apply(
    conn: sqlite3.Connection, call: Invocation, writes: list[tuple[str, str, str]], doomed: list[str]
) -> list[str]:
    """Write the merged items, then delete the replaced ones (one transaction, in that order)."""
    now = time.time()
    for key, kind, value in writes:
        memory.put_item(conn, call.thread_id, call.persona.name, key, kind, value, now)
    return [key for key in doomed if memory.delete_item(conn, call.thread_id, key, summaries=False)]
