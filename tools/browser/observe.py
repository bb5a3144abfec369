"""An observation of the current page: its address, title, visible text and actionable elements.

Each element gets an ``el_`` id (six hex characters, a hash of its role, name, tag and its rank
among elements alike), written into the page on the session's random marker attribute so
that an ``element_id`` target finds exactly that element. The same page observed twice gives
the same ids; the ids of the most recent observation are the ones to use.

The page's script runs under a time bound and scans a bounded number of nodes, so a hostile
page (a huge DOM, a script that never yields) costs at most that: a page that does not
answer in time is reported as hung.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from tools.base import ToolError
from tools.browser.session import BrowserSession

__all__ = ["DEFAULT_ELEMENTS", "MAX_ELEMENTS", "MAX_TEXT_CHARS", "observe"]

DEFAULT_ELEMENTS = 80
MAX_ELEMENTS = 300
MAX_TEXT_CHARS = 6_000
MAX_SCANNED = 20_000
OBSERVE_TIMEOUT = 10.0
CLOSE_TIMEOUT = 5.0

_SCRIPT = r"""
([attr, maxElements, includeHidden, maxText, maxScanned]) => {
  const ACTIONABLE = new Set(['button', 'link', 'checkbox', 'radio', 'textbox', 'searchbox',
    'combobox', 'listbox', 'option', 'menuitem', 'menuitemcheckbox', 'menuitemradio', 'tab',
    'switch', 'slider', 'spinbutton', 'treeitem']);
  const INPUT_ROLES = {checkbox: 'checkbox', radio: 'radio', button: 'button', submit: 'button',
    reset: 'button', image: 'button', range: 'slider', number: 'spinbutton', search: 'searchbox',
    file: 'button', hidden: null};
  const clip = (s, n) => (s || '').replace(/\s+/g, ' ').trim().slice(0, n);
  const roleOf = (el) => {
    const explicit = (el.getAttribute('role') || '').trim().split(/\s+/)[0].toLowerCase();
    if (explicit) return ACTIONABLE.has(explicit) ? explicit : null;
    const tag = el.tagName.toLowerCase();
    if (tag === 'a') return el.hasAttribute('href') ? 'link' : null;
    if (tag === 'button' || tag === 'summary') return 'button';
    if (tag === 'textarea') return 'textbox';
    if (tag === 'select') return (el.multiple || el.size > 1) ? 'listbox' : 'combobox';
    if (tag === 'input') {
      const type = (el.getAttribute('type') || 'text').toLowerCase();
      return Object.prototype.hasOwnProperty.call(INPUT_ROLES, type) ? INPUT_ROLES[type] : 'textbox';
    }
    if (el.isContentEditable) return 'textbox';
    if (el.hasAttribute('onclick') || el.hasAttribute('tabindex')) return 'generic';
    return null;
  };
  const nameOf = (el) => {
    const aria = el.getAttribute('aria-label');
    if (aria && aria.trim()) return aria;
    const by = el.getAttribute('aria-labelledby');
    if (by) {
      const text = by.split(/\s+/).map((id) => document.getElementById(id))
        .filter(Boolean).map((n) => n.textContent).join(' ');
      if (text.trim()) return text;
    }
    const tag = el.tagName.toLowerCase();
    if (tag === 'input' || tag === 'select' || tag === 'textarea') {
      const labels = el.labels ? Array.from(el.labels).map((l) => l.textContent).join(' ') : '';
      if (labels.trim()) return labels;
      const type = (el.getAttribute('type') || '').toLowerCase();
      if (['button', 'submit', 'reset'].includes(type) && el.value) return el.value;
      return el.getAttribute('placeholder') || el.getAttribute('title') || el.getAttribute('name') || '';
    }
    const text = el.innerText || el.textContent || '';
    if (text.trim()) return text;
    const img = el.querySelector('img[alt]');
    return (img && img.getAttribute('alt')) || el.getAttribute('title') || '';
  };
  const visible = (el) => {
    if (el.checkVisibility && !el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})) return false;
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  };
  const hash = (s) => {
    let h = 0x811c9dc5;
    for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 0x01000193) >>> 0; }
    return ((h >>> 8) ^ (h & 0xff)).toString(16).padStart(6, '0').slice(-6);
  };
  for (const old of document.querySelectorAll('[' + attr + ']')) old.removeAttribute(attr);
  const selector = 'a,button,input,select,textarea,summary,[role],[onclick],[tabindex],[contenteditable]';
  const seen = new Map(), used = new Set(), elements = [];
  let scanned = 0, truncated = false;
  for (const el of document.querySelectorAll(selector)) {
    if (++scanned > maxScanned) { truncated = true; break; }
    const role = roleOf(el);
    if (!role) continue;
    const shown = visible(el);
    if (!shown && !includeHidden) continue;
    if (elements.length >= maxElements) { truncated = true; break; }
    const name = clip(nameOf(el), 120);
    const tag = el.tagName.toLowerCase();
    const sig = role + '|' + name + '|' + tag;
    const rank = seen.get(sig) || 0;
    seen.set(sig, rank + 1);
    let id = 'el_' + hash(sig + '|' + rank);
    for (let n = 1; used.has(id); n++) id = 'el_' + hash(sig + '|' + rank + '#' + n);
    used.add(id);
    el.setAttribute(attr, id);
    const item = {id, role, name, tag};
    if (tag === 'input') item.type = (el.getAttribute('type') || 'text').toLowerCase();
    if ((tag === 'input' || tag === 'textarea' || tag === 'select') && item.type !== 'password'
        && el.value) item.value = clip(el.value, 200);
    if (role === 'checkbox' || role === 'radio' || role === 'switch') item.checked = !!el.checked;
    if (el.disabled) item.disabled = true;
    if (tag === 'a' && el.href) item.href = el.href.slice(0, 300);
    if (!shown) item.hidden = true;
    elements.push(item);
  }
  const body = document.body ? (document.body.innerText || '') : '';
  return {title: (document.title || '').slice(0, 300), text: body.slice(0, maxText),
          textTruncated: body.length > maxText, elements, elementsTruncated: truncated};
}
"""


async def observe(
    session: BrowserSession, *, max_elements: int = DEFAULT_ELEMENTS, include_hidden: bool = False
) -> dict[str, Any]:
    """The observation of ``session``'s current page, with what happened since the last one."""
    page = session.require_page()
    args = [session.marker, max_elements, include_hidden, MAX_TEXT_CHARS, MAX_SCANNED]
    try:
        async with asyncio.timeout(OBSERVE_TIMEOUT):
            found = await page.evaluate(_SCRIPT, args)
    except TimeoutError:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CLOSE_TIMEOUT):
                await page.close()
        raise ToolError(
            f"the page did not answer within {OBSERVE_TIMEOUT:g} s (a script that never yields?); "
            "its tab was closed: call browser_open to load a page again"
        ) from None
    except Exception as exc:
        raise ToolError(f"could not read the page: {first_line(exc)}; call browser_observe again") from None
    return {"url": page.url, **found, **session.take_events()}


def first_line(exc: BaseException) -> str:
    """The first line of a Playwright error (the rest is its call log)."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
