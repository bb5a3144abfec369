// Live updates of the overview from the console's event stream (same origin, session cookie).
"use strict";
(function () {
  const live = document.getElementById("live");
  if (!live || !window.EventSource) return;
  const counts = (obj) => {
    const parts = Object.entries(obj).map(([k, v]) => k + ": " + v);
    return parts.length ? parts.join(" ") : "empty";
  };
  const source = new EventSource(document.querySelector("link[rel=stylesheet]").href.replace(/static\/console\.css$/, "events"));
  source.addEventListener("open", () => { live.textContent = "live"; });
  source.addEventListener("error", () => { live.textContent = "live updates paused"; });
  source.addEventListener("end", () => { source.close(); live.textContent = "signed out: reload"; });
  source.addEventListener("status", (event) => {
    const data = JSON.parse(event.data);
    for (const el of document.querySelectorAll("[data-live]")) {
      const value = data[el.dataset.live];
      if (value === undefined) continue;
      el.textContent = typeof value === "object" ? counts(value) : String(value);
    }
    for (const el of document.querySelectorAll("[data-live-channel]")) {
      const state = data.channels[el.dataset.liveChannel];
      if (state !== undefined) el.textContent = state;
    }
    live.textContent = "live · " + new Date().toLocaleTimeString();
  });
})();
