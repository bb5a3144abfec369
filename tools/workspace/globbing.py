"""Glob patterns: bounded brace expansion and translation to a regular expression.

Braces are nested comma lists (``{a,b{c,d}}``); a range (``{1..3}``), a brace without a comma
and an unbalanced brace are literal. Expansion stops at :data:`MAX_ALTERNATIVES` patterns or
:data:`MAX_EXPANDED_CHARS` characters in all, as the model-tools reference bounds it.
``*`` and ``?`` stay within one path component; ``**`` as a whole component matches any
number of folders.
"""

from __future__ import annotations

import re

from tools.base import ToolError

__all__ = ["MAX_ALTERNATIVES", "MAX_EXPANDED_CHARS", "compile_glob", "expand_braces"]

MAX_ALTERNATIVES = 255
MAX_EXPANDED_CHARS = 65_535


def _matching_brace(text: str, start: int) -> tuple[int, list[int]] | None:
    """The index of the ``}`` closing ``text[start]`` and its top-level commas, or ``None``."""
    depth = 0
    commas: list[int] = []
    i = start
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i, commas
        elif ch == "," and depth == 1:
            commas.append(i)
        i += 1
    return None


def expand_braces(pattern: str) -> list[str]:
    """Every alternative of ``pattern``'s comma-list braces, bounded."""
    out: list[str] = []
    total = 0
    work = [pattern]
    while work:
        item = work.pop()
        expanded = False
        i = 0
        while i < len(item):
            if item[i] == "\\":
                i += 2
                continue
            if item[i] == "{":
                found = _matching_brace(item, i)
                if found is not None and found[1]:
                    end, commas = found
                    bounds = [i, *commas, end]
                    parts = [item[bounds[k] + 1 : bounds[k + 1]] for k in range(len(bounds) - 1)]
                    head, tail = item[:i], item[end + 1 :]
                    if len(out) + len(work) + len(parts) > MAX_ALTERNATIVES:
                        raise ToolError(
                            f"the pattern's braces expand to more than {MAX_ALTERNATIVES} alternatives; "
                            "use fewer or run several narrower globs"
                        )
                    work.extend(head + p + tail for p in reversed(parts))
                    expanded = True
                    break
            i += 1
        if not expanded:
            total += len(item)
            if total > MAX_EXPANDED_CHARS:
                raise ToolError(
                    f"the pattern's braces expand to more than {MAX_EXPANDED_CHARS} characters; shorten it"
                )
            out.append(item)
    return out


def _component(part: str) -> str:
    out = []
    i = 0
    while i < len(part):
        ch = part[i]
        if ch == "\\" and i + 1 < len(part):
            out.append(re.escape(part[i + 1]))
            i += 2
            continue
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = part.find("]", i + 2 if part[i + 1 : i + 2] in ("!", "^") else i + 1)
            if end < 0:
                out.append(re.escape(ch))
            else:
                body = part[i + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append(f"[{body.replace(chr(92), chr(92) * 2)}]")
                i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _translate(pattern: str) -> str:
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    out = ""
    for k, part in enumerate(parts):
        last = k == len(parts) - 1
        if part == "**":
            out += ".*" if last else "(?:[^/]+/)*"
        else:
            out += _component(part) + ("" if last else "/")
    return out


def compile_glob(pattern: str) -> re.Pattern[str]:
    """One regular expression matching a relative path against any alternative of ``pattern``."""
    alternatives = expand_braces(pattern)
    try:
        return re.compile("(?:" + "|".join(_translate(a) for a in alternatives) + r")\Z", re.DOTALL)
    except re.error as exc:
        raise ToolError(f"the pattern is not a valid glob ({exc.msg}); check its [ ] classes") from None


def literal_names(pattern: str) -> set[str]:
    """The path components written without wildcards (a skipped folder named here is searched)."""
    names: set[str] = set()
    for alternative in expand_braces(pattern):
        names.update(p for p in alternative.split("/") if p and not set(p) & set("*?["))
    return names
