// The shield ops console: one page per hash (#queues, #tasks, ...), each
// read from the JSON API under /ops/api/ and refreshed every REFRESH_MS.
// Same-origin only; the bearer token (if the endpoint has one) is kept in
// sessionStorage and sent in the Authorization header: no cookies.
"use strict";
(function () {
  const REFRESH_MS = 2000;
  const pages = ["queues", "tasks", "boards", "locks", "limiters", "runtime"];
  let admin = false, openDead = null, openBoard = null, lockName = "", timer = null;
  const $ = (id) => document.getElementById(id);

  function token() { return sessionStorage.getItem("shield-ops-token") || ""; }
  function headers(json) {
    const h = {};
    if (token()) h["Authorization"] = "Bearer " + token();
    if (json) h["Content-Type"] = "application/json";
    return h;
  }
  async function api(path, opts) {
    const res = await fetch("api/" + path, Object.assign({ headers: headers(opts && opts.body !== undefined), credentials: "omit" }, opts || {}));
    let body = null;
    try { body = await res.json(); } catch (e) { body = null; }
    if (!res.ok) {
      const err = new Error((body && body.error) || (res.status === 401 ? "unauthorized: enter the bearer token" : "HTTP " + res.status));
      err.status = res.status;
      throw err;
    }
    return body;
  }
  async function action(path, body) {
    try {
      const r = await api(path, { method: "POST", body: JSON.stringify(body || {}) });
      status("done: " + path + " " + JSON.stringify(r));
    } catch (e) {
      status("action failed: " + e.message, true);
    }
    refresh();
  }
  function status(msg, bad) { const s = $("status"); s.textContent = msg; s.classList.toggle("error", !!bad); }
  function enc(s) { return encodeURIComponent(s); }
  function fmtTime(s) { return s ? s.replace("T", " ").replace("Z", " UTC") : "–"; }
  function fmtAge(ms) {
    if (ms === null || ms === undefined) return "–";
    if (ms < 1000) return ms + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    if (ms < 3600000) return (ms / 60000).toFixed(1) + " min";
    return (ms / 3600000).toFixed(1) + " h";
  }
  function el(tag, text, cls) { const e = document.createElement(tag); if (text !== undefined) e.textContent = String(text); if (cls) e.className = cls; return e; }
  function btn(label, fn, cls, attrs) {
    const b = el("button", label, cls); b.type = "button";
    for (const k in (attrs || {})) b.setAttribute(k, attrs[k]);
    b.addEventListener("click", fn); return b;
  }
  function row(cells, attrs) {
    const tr = document.createElement("tr");
    for (const k in (attrs || {})) tr.setAttribute(k, attrs[k]);
    for (const c of cells) {
      if (c instanceof Node) { tr.appendChild(c); continue; }
      const td = el("td", c.v, c.cls); if (c.name) td.dataset.col = c.name; tr.appendChild(td);
    }
    return tr;
  }
  function fill(tableId, rows, empty) {
    const tb = $(tableId).querySelector("tbody");
    tb.replaceChildren(...rows);
    if (!rows.length && empty) { const tr = row([{ v: empty }]); tr.firstChild.colSpan = 20; tr.classList.add("empty"); tb.appendChild(tr); }
  }
  function facts(id, pairs) {
    const dl = $(id); dl.replaceChildren();
    for (const [k, v, name] of pairs) { dl.appendChild(el("dt", k)); const dd = el("dd", v); if (name) dd.dataset.fact = name; dl.appendChild(dd); }
  }
  function td(children) { const t = document.createElement("td"); for (const c of children) if (c) t.appendChild(c); return t; }

  const renderers = {
    async queues() {
      const d = await api("queues");
      fill("queues", d.queues.map((q) => row([
        { v: q.name, name: "name" }, { v: q.kind }, { v: q.length, cls: "num", name: "length" }, { v: q.in_flight, cls: "num" },
        { v: q.ready, cls: "num" }, { v: q.pending, cls: "num" }, { v: q.retrying, cls: "num" },
        { v: q.consumers, cls: "num" }, { v: fmtAge(q.oldest_age_ms), cls: "num", name: "oldest" }, { v: q.dead_letters, cls: "num", name: "dead" },
        td([(q.kind === "reliable" || q.kind === "broadcast") ? btn("dead letters", () => { openDead = q.name; refresh(); }, "", { "data-dead": q.name }) : null,
            btn("purge", () => { if (confirm("Purge every message of " + q.name + "?")) action("queues/" + enc(q.name) + "/purge"); }, "danger admin-only",
              { "data-action": "purge" })]),
      ], { "data-queue": q.name })), "no queues opened in this process");
      if (openDead === null) { $("dead").hidden = true; return; }
      const dd = await api("queues/" + enc(openDead) + "/dead?limit=100");
      $("dead").hidden = false; $("dead-queue").textContent = openDead;
      fill("dead-letters", dd.dead_letters.map((l) => row([
        { v: l.id, name: "id" }, { v: l.message_id }, { v: l.group || "" }, { v: l.deliveries, cls: "num" }, { v: fmtTime(l.at) },
        { v: l.preview + (l.truncated ? " … (" + l.size + " bytes)" : ""), cls: "payload" },
        td([btn("requeue", () => action("queues/" + enc(openDead) + "/requeue", { ids: [l.id] }), "admin-only", { "data-action": "requeue" }),
            btn("delete", () => action("queues/" + enc(openDead) + "/dead/delete", { ids: [l.id] }), "danger admin-only", { "data-action": "delete" })]),
      ], { "data-dead-id": l.id })), "no dead letters");
    },
    async tasks() {
      const d = await api("tasks");
      fill("tasks", d.tasks.map((t) => row([
        { v: t.name, name: "name" }, { v: t.schedule }, { v: t.status, cls: "st-" + t.status, name: "status" },
        { v: fmtTime(t.next_run) }, { v: fmtTime(t.last_run) }, { v: t.runs, cls: "num", name: "runs" },
        { v: t.failures, cls: "num", name: "failures" }, { v: t.missed, cls: "num" }, { v: t.skipped, cls: "num" },
        { v: t.last_error || "", cls: "payload" },
        td([t.status === "paused"
              ? btn("resume", () => action("tasks/" + enc(t.name) + "/resume"), "admin-only", { "data-action": "resume" })
              : btn("pause", () => action("tasks/" + enc(t.name) + "/pause"), "admin-only", { "data-action": "pause" }),
            t.status === "disabled"
              ? btn("enable", () => action("tasks/" + enc(t.name) + "/enable"), "admin-only", { "data-action": "enable" })
              : btn("disable", () => action("tasks/" + enc(t.name) + "/disable"), "admin-only", { "data-action": "disable" }),
            btn("trigger", () => action("tasks/" + enc(t.name) + "/trigger"), "admin-only", { "data-action": "trigger" }),
            btn("remove", () => { if (confirm("Remove task " + t.name + "?")) action("tasks/" + enc(t.name) + "/remove"); }, "danger admin-only", { "data-action": "remove" })]),
      ], { "data-task": t.name })), "no scheduled tasks");
    },
    async boards() {
      const d = await api("boards");
      fill("boards", d.boards.map((b) => row([
        { v: b.name, name: "name" }, { v: b.count, cls: "num", name: "count" }, { v: b.version, cls: "num", name: "version" },
        td([btn("open", () => { openBoard = b.name; refresh(); }, "", { "data-open": b.name })]),
      ], { "data-board": b.name })), "no leaderboards opened in this process");
      if (openBoard === null) { $("board").hidden = true; return; }
      const member = $("member").value.trim();
      const q = "boards/" + enc(openBoard) + "?top=" + enc($("board-top").value || "10") + (member ? "&member=" + enc(member) : "");
      const b = await api(q);
      $("board").hidden = false; $("board-name").textContent = openBoard + " (" + b.count + " members, version " + b.version + ")";
      const entries = (es, who) => es.map((e) => row([{ v: e.rank, cls: "num" }, { v: e.uid }, { v: e.score, cls: "num" }],
        e.uid === who ? { "data-uid": e.uid, class: "me" } : { "data-uid": e.uid }));
      fill("board-top-table", entries(b.top), "empty board");
      $("around-member").textContent = member;
      $("around-missing").hidden = !member || b.found;
      fill("board-around", member ? entries(b.around, member) : []);
    },
    async locks() {
      const q = lockName ? "?name=" + enc(lockName) : "";
      const d = await api("locks" + q);
      facts("lock-facts", [["held in this process", d.held, "held"], ["waiting in this process", d.waiting, "waiting"],
        ["holds lost", d.lost], ["released at task end", d.abandoned]]);
      const pr = d.process;
      $("held-count").textContent = pr.truncated ? "(the first " + pr.locks.length + " of " + pr.total + ")" : "(" + pr.total + ")";
      const holders = (l) => !l.kind.includes("rwlock") ? String(l.holders) :
        [l.readers ? l.readers + (l.readers === 1 ? " reader" : " readers") : "", l.writers ? l.writers + " writer" : ""].filter((x) => x).join(", ");
      const owners = (l) => l.owners.map((o) => o.owner + (o.count > 1 ? " ×" + o.count : "") + (o.mode === "shared" ? " (read)" : "") +
          (o.state !== "held" ? " (" + o.state + ")" : "") + (o.service ? " [" + o.service + "]" : "")).join("\n") +
        (l.holders > l.owners.length ? "\n… " + (l.holders - l.owners.length) + " more" : "");
      fill("held-locks", pr.locks.map((l) => row([
        { v: l.name, name: "name" }, { v: l.kind, name: "kind" }, { v: holders(l), name: "holders" },
        { v: l.waiting, cls: "num", name: "waiting" }, { v: fmtAge(l.held_ms), cls: "num", name: "age" },
        { v: l.ttl_ms < 0 ? "none" : fmtAge(l.ttl_ms), cls: "num", name: "ttl" },
        { v: l.token === null ? (l.backend_error ? "?" : "–") : l.token, cls: "num", name: "token" },
        { v: owners(l), cls: "payload", name: "owners" },
      ], { "data-lock": l.name, title: l.backend_error || "" })), "no lock held in this process");
      const l = d.lock;
      $("lock-info").hidden = !l; $("lock-owners").hidden = !l;
      if (!l) return;
      facts("lock-info", [["lock", l.name], ["held", l.held ? "yes" : "no", "lock-held"], ["mode", l.mode],
        ["ttl", l.ttl_ms < 0 ? "none" : l.ttl_ms + " ms", "lock-ttl"], ["acquired at", fmtTime(l.acquired_at)],
        ["fencing token", l.token], ["waiting", l.waiting]]);
      fill("lock-owners", l.owners.map((o) => row([{ v: o.owner, name: "owner" }, { v: o.count, cls: "num" }, { v: o.service || "" }])), "no holder");
    },
    async limiters() {
      const d = await api("limiters");
      facts("limiter-facts", [["limiters", d.limiters], ["active keys", d.active_keys, "active"], ["allowed", d.allowed],
        ["rejected", d.rejected, "rejected"], ["unavailable", d.unavailable], ["rejected today", d.rejected_today], ["degraded", d.degraded]]);
    },
    async runtime() {
      const d = await api("runtime");
      facts("runtime-facts", [["Lua runtimes", d.runtimes], ["tasks alive", d.tasks, "tasks"], ["loop-lag probes", d.loop_lag.samples],
        ["loop lag, mean", d.loop_lag.mean_ms.toFixed(3) + " ms"], ["loop lag, p99 ≤", d.loop_lag.p99_ms + " ms"]]);
    },
  };

  function current() { const p = location.hash.slice(1); return pages.includes(p) ? p : "queues"; }
  let running = false;
  async function refresh() {
    if (running) return;
    running = true;
    const p = current();
    for (const x of pages) $("page-" + x).classList.toggle("shown", x === p);
    for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.page === p);
    try {
      await renderers[p]();
      status("updated " + new Date().toLocaleTimeString() + " · refreshes every " + REFRESH_MS / 1000 + " s");
      document.body.dataset.loaded = p;
    } catch (e) {
      status(e.message, true);
    } finally {
      running = false;
    }
  }
  async function loadInfo() {
    try {
      const i = await api("info");
      admin = !!i.admin;
    } catch (e) { admin = false; }
    document.body.classList.toggle("admin", admin);
    $("mode").textContent = admin ? "admin" : "read-only";
    $("mode").classList.toggle("admin", admin);
  }

  window.addEventListener("hashchange", refresh);
  $("save-token").addEventListener("click", async () => {
    sessionStorage.setItem("shield-ops-token", $("token").value);
    $("token").value = "";
    await loadInfo(); refresh();
  });
  $("requeue-all").addEventListener("click", () => action("queues/" + enc(openDead) + "/requeue", { all: true }));
  $("delete-all").addEventListener("click", () => { if (confirm("Delete every dead letter of " + openDead + "?")) action("queues/" + enc(openDead) + "/dead/delete", { all: true }); });
  $("purge-queue").addEventListener("click", () => { if (confirm("Purge every message of " + openDead + "?")) action("queues/" + enc(openDead) + "/purge"); });
  $("board-form").addEventListener("submit", (e) => { e.preventDefault(); refresh(); });
  $("clear-board").addEventListener("click", () => { if (confirm("Clear every member of " + openBoard + "?")) action("boards/" + enc(openBoard) + "/clear"); });
  $("lock-form").addEventListener("submit", (e) => { e.preventDefault(); lockName = $("lock-name").value.trim(); refresh(); });
  loadInfo().then(refresh);
  timer = setInterval(refresh, REFRESH_MS);
})();
