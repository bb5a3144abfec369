// Talon web chat: the chat page and the embeddable widget (one script, no build step).
// Embed: <script src="https://TALON/chat/CHANNEL/chat.js" data-token="SITE_TOKEN" defer></script>
// Messages the server sends as "html" are sanitized there; everything else is shown as text.
(function () {
  "use strict";
  const script = document.currentScript;
  const base = new URL(".", script.src).href;
  const fragment = new URLSearchParams(location.hash.slice(1));
  const token = script.dataset.token || fragment.get("site") || "";
  const mountSelector = script.dataset.mount;

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function newId() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID().replace(/-/g, "");
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function size(n) {
    if (n >= 1e6) return (n / 1e6).toFixed(1) + " MB";
    if (n >= 1e3) return (n / 1e3).toFixed(1) + " KB";
    return n + " bytes";
  }

  function build(root) {
    const box = el("div", "talon-chat");
    const bar = el("div", "talon-bar");
    const title = el("span", "talon-title", script.dataset.title || "Chat");
    const status = el("span", "talon-status", "connecting…");
    const newButton = el("button", "talon-new", "New");
    newButton.type = "button";
    newButton.title = "Start a new conversation (/new)";
    const stopButton = el("button", "talon-stop", "Stop");
    stopButton.type = "button";
    stopButton.title = "Stop the answer being written (/stop)";
    bar.append(title, status, newButton, stopButton);
    const log = el("div", "talon-log");
    log.setAttribute("role", "log");
    log.setAttribute("aria-live", "polite");
    const working = el("div", "talon-working");
    const form = el("form", "talon-form");
    const input = el("textarea");
    input.rows = 1;
    input.placeholder = "Message";
    input.setAttribute("aria-label", "Message");
    const files = el("input");
    files.type = "file";
    files.multiple = true;
    files.setAttribute("aria-label", "Attach files");
    const send = el("button", "talon-send", "Send");
    send.type = "submit";
    form.append(input, files, send);
    box.append(bar, log, working, form);
    root.append(box);
    return { box, status, newButton, stopButton, log, working, form, input, files };
  }

  function start(root) {
    const ui = build(root);
    const shown = new Map(); // message id -> element
    const pending = new Map(); // event id -> element of a message not yet confirmed
    let lastSeq = 0;
    let stream = null;
    let csrf = ""; // a signed-in console user's: their posts carry it

    function error(text, signIn) {
      ui.status.textContent = text;
      if (signIn) {
        const link = el("a", "talon-sign-in", "Sign in");
        link.href = new URL(signIn, base).href;
        ui.status.append(" ", link);
      }
    }

    function show(m) {
      if (m.seq > lastSeq) lastSeq = m.seq;
      if (m.event_id && pending.has(m.event_id)) {
        pending.get(m.event_id).remove();
        pending.delete(m.event_id);
      }
      let node = shown.get(m.id);
      if (m.deleted) {
        if (node) node.remove();
        shown.delete(m.id);
        return;
      }
      if (!node) {
        node = el("div");
        node.dataset.id = String(m.id);
        shown.set(m.id, node);
        const after = [...shown.keys()].filter((id) => id > m.id).sort((a, b) => a - b)[0];
        const before = after === undefined ? null : shown.get(after);
        ui.log.insertBefore(node, before && before.isConnected ? before : null);
      }
      node.className = "talon-msg " + m.role + " " + m.format;
      node.dataset.format = m.format;
      if (m.format === "html") {
        node.innerHTML = m.body; // sanitized by the server (connectors/web/html.py)
      } else if (m.format === "file" && m.file) {
        const link = el("a", "", m.file.name + " (" + size(m.file.size || 0) + ")");
        link.href = new URL(m.file.url, base).href;
        link.download = m.file.name;
        node.replaceChildren(link);
      } else {
        node.textContent = m.body;
      }
      ui.log.scrollTop = ui.log.scrollHeight;
    }

    function connect() {
      if (stream) stream.close();
      // A new EventSource starts without Last-Event-ID: ?after= says where this page is.
      stream = new EventSource(base + "api/events?after=" + lastSeq, { withCredentials: true });
      stream.addEventListener("open", () => {
        ui.status.textContent = ui.status.dataset.user ? "signed in as " + ui.status.dataset.user : "";
      });
      stream.addEventListener("message", (e) => show(JSON.parse(e.data)));
      stream.addEventListener("working", (e) => {
        ui.working.textContent = JSON.parse(e.data).on ? "…" : "";
      });
      stream.addEventListener("error", () => {
        ui.status.textContent = "reconnecting…";
        if (stream.readyState === EventSource.CLOSED) setTimeout(reopen, 2000);
      });
    }

    async function hello() {
      let response;
      try {
        response = await fetch(base + "api/hello", {
          method: "POST", credentials: "include", headers: { "X-Talon-Site": token },
        });
      } catch (exc) {
        // A refused origin gets no CORS headers, so the page cannot read why.
        throw new Error("cannot reach the chat, or this site may not use it");
      }
      const body = await response.json().catch(() => ({}));
      if (!response.ok) {
        const refused = new Error(body.error || "the chat refused this page (" + response.status + ")");
        refused.signIn = body.sign_in;
        throw refused;
      }
      csrf = body.csrf || "";
      if (body.user) ui.status.dataset.user = body.user;
    }

    async function reopen() {
      try {
        await hello();
        connect();
      } catch (exc) {
        error(String(exc.message || exc), exc.signIn);
        if (!exc.signIn) setTimeout(reopen, 5000);
      }
    }

    async function post(eventId, text, chosen) {
      let body;
      let type = {};
      if (chosen.length) {
        body = new FormData();
        body.append("event_id", eventId); // first: it names the files
        body.append("text", text);
        for (const file of chosen) body.append("file", file, file.name);
      } else {
        body = JSON.stringify({ event_id: eventId, text: text });
        type = { "Content-Type": "application/json" };
      }
      // The same event id on every try: a post the server already has is not stored twice.
      for (let attempt = 0; attempt < 8; attempt++) {
        // Signed in, a post carries the session's CSRF token; on a site's page, its token.
        const headers = Object.assign({}, type, csrf ? { "X-CSRF-Token": csrf } : { "X-Talon-Site": token });
        try {
          const response = await fetch(base + "api/messages", {
            method: "POST", credentials: "include", headers: headers, body: body,
          });
          if (response.ok) return;
          if (response.status === 401) {
            csrf = "";
            await hello().catch((exc) => {
              if (exc.signIn) throw exc; // the console session ended: sign in again
            });
          } else if (response.status < 500 && response.status !== 429) {
            const found = await response.json().catch(() => ({}));
            throw new Error(found.error || "refused (" + response.status + ")");
          }
        } catch (exc) {
          if (!(exc instanceof TypeError)) throw exc; // a TypeError is the network: try again
        }
        await new Promise((r) => setTimeout(r, Math.min(500 * 2 ** attempt, 8000)));
      }
      throw new Error("could not send; check the connection");
    }

    async function submit(text) {
      const chosen = Array.from(ui.files.files || []);
      if (!text.trim() && !chosen.length) return;
      const eventId = newId();
      const node = el("div", "talon-msg user pending", text || chosen.map((f) => "[" + f.name + "]").join(" "));
      pending.set(eventId, node);
      ui.log.append(node);
      ui.log.scrollTop = ui.log.scrollHeight;
      ui.files.value = "";
      try {
        await post(eventId, text, chosen);
      } catch (exc) {
        node.classList.add("failed");
        node.title = String(exc.message || exc);
        error(String(exc.message || exc), exc.signIn);
      }
    }

    ui.form.addEventListener("submit", (e) => {
      e.preventDefault();
      const text = ui.input.value;
      ui.input.value = "";
      submit(text);
    });
    ui.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) {
        e.preventDefault();
        ui.form.requestSubmit();
      }
    });
    ui.newButton.addEventListener("click", () => submit("/new"));
    ui.stopButton.addEventListener("click", () => submit("/stop"));
    reopen();
  }

  function widget() {
    const host = el("div");
    document.body.append(host);
    const shadow = host.attachShadow({ mode: "open" });
    const css = el("link");
    css.rel = "stylesheet";
    css.href = base + "chat.css";
    const button = el("button", "talon-widget-button", script.dataset.label || "Chat");
    button.type = "button";
    const panel = el("div", "talon-widget-panel");
    panel.hidden = true;
    shadow.append(css, panel, button);
    let started = false;
    button.addEventListener("click", () => {
      panel.hidden = !panel.hidden;
      if (!started) { started = true; start(panel); }
    });
  }

  function boot() {
    if (mountSelector) start(document.querySelector(mountSelector));
    else widget();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot);
  else boot();
})();
