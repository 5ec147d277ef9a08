// The household's page: reads /dashboard/events (SSE, read with fetch so that the admin
// key goes in a header, never in a URL) and draws each snapshot. No framework, nothing
// fetched from elsewhere.
"use strict";

const KEY = "coordinator-admin-key";
const $ = (id) => document.getElementById(id);
let latest = null;
// How far Coordinator's clock reads ahead of this device's, from the latest picture's
// `taken_at`: waiting times and expiries are read on Coordinator's clock, as the page
// draws them, whatever this device's clock is set to.
let ahead = 0;

function now() {
  return Date.now() + ahead;
}

function headers() {
  const key = sessionStorage.getItem(KEY);
  return key ? { Authorization: "Bearer " + key } : {};
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

function since(iso) {
  const s = Math.max(0, Math.round((now() - Date.parse(iso)) / 1000));
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
}

function ms(v) {
  if (v === null || v === undefined) return "–";
  return v < 1000 ? v + " ms" : (v / 1000).toFixed(1) + " s";
}

function clock(iso) {
  return new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

// How long a resident model stays: "until 14:05 · in 4 min" (local time), "kept" beyond a
// day (a model kept forever), "expiring" once due; "" when not known.
function until(iso) {
  if (!iso) return "";
  const left = Math.round((Date.parse(iso) - now()) / 1000);
  if (left <= 0) return "expiring";
  if (left > 86400) return "kept";
  const at = new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  return "until " + at + " · in " + (left < 60 ? left + " s" : Math.ceil(left / 60) + " min");
}

// A machine whose clock reads more than a second from Coordinator's: the snapshot's line,
// "clock 30.0 s behind Coordinator's" (its expiries above are on Coordinator's clock
// already); null otherwise.
function clockApart(line) {
  return line ? el("div", { class: "quiet clock" }, line) : null;
}

function drawMachines(machines) {
  const box = $("machines");
  box.replaceChildren(...machines.map((m) => {
    const figures = new Map(m.latest.map((f) => [f.model, f]));
    const models = m.models.map((name) => {
      const f = figures.get(name);
      const resident = m.resident.includes(name);
      const stay = resident ? until((m.expires_at || {})[name]) : "";
      const perf = f ? ms(f.ttft_ms) + " · " + (f.tokens_per_s ?? "–") + " tok/s" : "";
      return el("div", { class: "model" },
        el("span", { class: resident ? "resident" : "", title: resident ? "resident" : "" },
          name + (resident ? " ●" : "")),
        stay ? el("span", { class: "quiet expiry", "data-expires": m.expires_at[name] }, stay) : null,
        el("span", { class: "quiet" }, perf));
    });
    return el("div", { class: "card", "data-machine": m.name },
      el("h3", {},
        el("span", {}, el("span", { class: "dot " + (m.healthy ? "ok" : "bad") }), m.name),
        el("span", { class: "quiet slots" }, m.in_flight + "/" + m.slots + " slots")),
      el("div", { class: "quiet" }, m.kind + (m.healthy ? "" : " · unhealthy")),
      ...models,
      clockApart(m.clock_apart),
      m.last_error ? el("div", { class: "problem" }, m.last_error) : null);
  }));
}

function drawQueue(queue, total) {
  const body = $("queue").tBodies[0];
  body.replaceChildren(...queue.map((w) => {
    const row = el("tr", { "data-task": w.task_id },
      el("td", { class: "position" }, w.position ?? "–"),
      el("td", {}, w.lane),
      el("td", {}, w.person),
      el("td", {}, w.priority),
      el("td", { class: "waiting", "data-since": w.queued_at }, since(w.queued_at)),
      el("td", {}, w.eta_s === null || w.eta_s === undefined ? "–" : "~" + w.eta_s + " s"),
      el("td", { class: "prompt" }, w.prompt));
    return row;
  }));
  $("queue-empty").hidden = queue.length > 0;
  $("queued-total").textContent = total ? "(" + total + ")" : "";
}

function drawRecent(recent) {
  const body = $("recent").tBodies[0];
  body.replaceChildren(...recent.map((t) => el("tr", { "data-task": t.task_id },
    el("td", {}, clock(t.created_at)),
    el("td", {}, t.person),
    el("td", { class: "prompt", title: t.reasons.join("; ") }, t.prompt),
    el("td", {}, t.internal_task || t.domain),
    el("td", { class: "opt" }, t.lane),
    el("td", {}, t.model),
    el("td", { class: "opt" }, t.machine || "–"),
    el("td", { class: "status status-" + t.status }, t.status),
    el("td", {}, ms(t.first_token_ms)),
    el("td", { class: "opt" }, ms(t.total_ms)),
    el("td", { class: "opt" }, t.note || t.reasons.join("; ")))));
}

function drawFigures(s) {
  $("memory").replaceChildren(...(s.memory.length
    ? s.memory.map((m) => el("li", {}, m.person + ": " + m.items + " items"))
    : [el("li", { class: "quiet" }, "No memories.")]));
  const fallbacks = Object.entries(s.web.fallbacks);
  $("web").replaceChildren(
    el("li", {}, "searches (recent tasks): " + s.web.searches),
    ...fallbacks.map(([why, n]) => el("li", {}, "fallback, " + why + ": " + n)));
}

function draw(s) {
  latest = s;
  if (s.taken_at) ahead = Date.parse(s.taken_at) - Date.now();
  drawMachines(s.machines);
  drawQueue(s.queue, s.queued_total);
  drawRecent(s.recent);
  drawFigures(s);
}

function field(list, name, value) {
  if (value === null || value === undefined || value === "") return;
  list.append(el("dt", {}, name), el("dd", {}, typeof value === "object" ? JSON.stringify(value, null, 1) : value));
}

async function openTask(id) {
  const res = await fetch("/tasks/" + encodeURIComponent(id), { headers: headers() });
  const dialog = $("detail");
  const list = $("detail-fields");
  $("detail-id").textContent = id;
  list.replaceChildren();
  if (!res.ok) {
    field(list, "problem", "HTTP " + res.status);
  } else {
    const t = await res.json();
    const c = t.context || {};
    field(list, "status", t.status);
    field(list, "position", t.position);
    field(list, "ETA", t.eta_s === undefined ? null : "~" + t.eta_s + " s");
    field(list, "person", t.person);
    field(list, "created", new Date(t.created_at).toLocaleString());
    field(list, "domain", t.domain);
    field(list, "lane", t.queue);
    field(list, "model", t.model);
    field(list, "machine", t.worker_id);
    field(list, "priority", t.priority);
    field(list, "reasons", (t.reasons || []).join("\n"));
    field(list, "attempts", t.attempts);
    field(list, "queue wait", t.queue_wait_ms === null ? null : ms(t.queue_wait_ms));
    field(list, "first token", t.first_token_ms === null ? null : ms(t.first_token_ms));
    field(list, "total", t.total_ms === null ? null : ms(t.total_ms));
    field(list, "prompt tokens", t.prompt_tokens);
    field(list, "answer tokens", t.completion_tokens);
    field(list, "composed prompt (est. tokens)", c.estimated_prompt_tokens);
    field(list, "window (num_ctx)", c.num_ctx);
    field(list, "history left out", c.history_dropped);
    field(list, "memory left out", c.memory_dropped);
    field(list, "web fallback", t.fallback_used ? t.fallback_reason || "yes" : null);
    field(list, "error", t.error);
    field(list, "prompt", t.prompt);
    field(list, "answer", t.response);
  }
  if (!dialog.open) dialog.showModal();
}

function rowClicked(event) {
  const row = event.target.closest("tr[data-task]");
  if (row) openTask(row.dataset.task);
}

function askForKey(problem) {
  $("main").hidden = true;
  $("key-form").hidden = false;
  $("key-problem").textContent = problem || "";
  $("live").textContent = "needs a key";
  $("live").className = "badge off";
}

async function follow() {
  let res;
  try {
    res = await fetch("/dashboard/events", { headers: { ...headers(), Accept: "text/event-stream" } });
  } catch (e) {
    return retry();
  }
  if (res.status === 401) {
    sessionStorage.removeItem(KEY);
    return askForKey(headers().Authorization ? "That key was not accepted." : "");
  }
  if (res.status === 403) {
    sessionStorage.removeItem(KEY);
    return askForKey("This key is not an admin's: the page shows everyone's tasks.");
  }
  if (!res.ok || !res.body) return retry();
  $("key-form").hidden = true;
  $("main").hidden = false;
  $("live").textContent = "live";
  $("live").className = "badge on";
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let kind = "message";
        const data = [];
        for (const line of frame.split("\n")) {
          if (line.startsWith("event:")) kind = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (kind === "snapshot" && data.length) draw(JSON.parse(data.join("\n")));
        if (kind === "problem") $("live").textContent = data.join(" ");
      }
    }
  } catch (e) {
    // The connection broke: reconnect below.
  }
  retry();
}

function retry() {
  $("live").textContent = "reconnecting…";
  $("live").className = "badge off";
  setTimeout(follow, 2000);
}

$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(KEY, $("key").value.trim());
  $("key").value = "";
  follow();
});
$("queue").addEventListener("click", rowClicked);
$("recent").addEventListener("click", rowClicked);
// Waiting times tick between snapshots.
setInterval(() => {
  for (const cell of document.querySelectorAll("td.waiting")) cell.textContent = since(cell.dataset.since);
}, 1000);
follow();
