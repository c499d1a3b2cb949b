/* echomq console: one page, plain JavaScript, no dependencies.
 *
 * Routes live in the URL fragment: #/ (queues), #/q/<queue>?state=&page=&group=&find=
 * (a queue: tab, page, lane and search in the URL), #/q/<queue>/job/<id> (a job).
 * The top bar's "go to job" box finds the queue holding an id from any page.
 * Every element is built with DOM calls and text nodes, never from HTML strings, so
 * payloads and log lines cannot inject markup. Changes are POSTs with a JSON body and
 * X-Requested-With. With a token set, the page logs in once (POST /api/login sets an
 * HttpOnly, SameSite=Strict session cookie); the token itself is never stored.
 * The live dot is green only while the event stream's beats (one a second) arrive
 * and say the server answers; a refused stream falls back to polling, and says so.
 */
(() => {
  "use strict";

  const STATES = ["pending", "active", "scheduled", "dead"];
  /* The job tabs: every state a page can read, as the server lists them (/api/config
   * `states`: the four sets, the completed jobs a queue keeps as history, the flow
   * parents waiting for their children); this list stands until the config is read. */
  let TABS = [...STATES, "completed", "waiting_children"];
  /* The states counted on the cards besides the four sets (a flow's waiting parents). */
  const EXTRA_CARDS = ["waiting_children"];
  const PAGE_SIZES = [20, 50, 100, 200];
  /* The history series' ranges (GET /api/queues/{q}/history?range=). */
  const HISTORY_RANGES = ["1h", "24h", "7d"];
  const RANGE_LABELS = { "1h": "1 h", "24h": "24 h", "7d": "7 d" };
  const POLL_MS = 5000;
  const FALLBACK_POLL_MS = 2000;
  const LIVE_STALE_MS = 2000;
  const STREAM_RETRY_MS = 30000;
  const GROUPS_PAGE = 50;
  /* One word each: "dead" is a job's state (it failed for good); the queue's all-time
   * total of jobs dead-lettered is "dead-lettered", never "failed", which the worker
   * table uses for failed attempts. */
  const COL_LABELS = { failed: "dead-lettered", waiting_children: "waiting children" };
  const COL_TITLES = { completed: "completed in all (the throughput record)",
    failed: "jobs dead-lettered in all (the throughput record)" };
  const DRAIN_BUDGET = 1000; // jobs per drain request (the server's bounded call)
  const REASONS = {
    gone: "the job no longer exists",
    locked: "a worker holds this job",
    not_dead: "only a dead job can be reprocessed",
    not_finished: "only a completed or dead job can be run again as a copy",
    not_scheduled: "only a scheduled job can be run now",
    not_active: "only a running (active) job can be cancelled",
    not_waiting: "only a parent waiting for its children can be released, failed or cancelled",
    not_pending: "the job is not pending",
    not_paused: "pause the queue first",
    active: "jobs are in flight: tick force to delete them too",
    stale: "the fencing token is not current",
    read_only: "the console is read-only",
    token: "a valid token is required (log in with the Token button)",
    streams: "too many live streams from this browser: polling instead",
    cross_site: "cross-site request refused",
    host: "host refused",
  };

  const config = { read_only: false, token_required: false, authenticated: true, server: "" };
  let current = null; // the mounted view: { stop() }

  // ------------------------------------------------------------------ helpers
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") el.className = value;
      else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else if (key === "dataset") Object.assign(el.dataset, value);
      else if (value === true) el.setAttribute(key, "");
      else el.setAttribute(key, String(value));
    }
    return add(el, children);
  }
  /* Job text is data: like the CLI (echomq.safetext), every control character (C0
   * but line breaks and tabs, DEL, C1) and every bidi override or isolate is shown as
   * an escape, so U+202E cannot turn "gnp.exe" into "exe.png" on the page. */
  const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  const safeText = (text) => text.replace(UNSAFE, (ch) => {
    if (ch === "\r") return "\\r";
    const code = ch.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
  /* Append children (nodes or text, escaped; null, undefined and false are skipped). */
  function add(el, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(safeText(String(child))));
    }
    return el;
  }
  /* Replace an element's children. */
  function fill(el, ...children) {
    el.replaceChildren();
    return add(el, children);
  }
  const $ = (sel, root = document) => root.querySelector(sel);
  const enc = encodeURIComponent;
  const fmt = (n) => Number(n || 0).toLocaleString("en-US");
  const qpath = (q) => `/api/queues/${enc(q)}`;
  const qlink = (q) => `#/q/${enc(q)}`;
  const jlink = (q, id) => `#/q/${enc(q)}/job/${enc(id)}`;

  function relTime(ms, now) {
    if (ms === null || ms === undefined || ms === "") return "";
    const diff = Number(ms) - now;
    const a = Math.abs(diff);
    let text;
    if (a < 1000) return "now";
    if (a < 60e3) text = `${Math.round(a / 1e3)}s`;
    else if (a < 3600e3) text = `${Math.round(a / 60e3)}m`;
    else if (a < 86400e3) text = `${Math.round(a / 3600e3)}h`;
    else text = `${Math.round(a / 86400e3)}d`;
    return diff > 0 ? `in ${text}` : `${text} ago`;
  }
  function isoTime(ms) {
    return ms === null || ms === undefined ? "" : new Date(Number(ms)).toISOString();
  }
  /* A duration in ms as a short text: 850 ms, 12.3 s, 4 m, 2.5 h. */
  function span(ms) {
    if (ms === null || ms === undefined) return "—";
    const a = Number(ms);
    if (a < 1000) return `${a} ms`;
    if (a < 120e3) return `${(a / 1e3).toFixed(1)} s`;
    if (a < 7200e3) return `${Math.round(a / 60e3)} m`;
    return `${(a / 3600e3).toFixed(1)} h`;
  }
  /* A datetime-local input's value as ms since the epoch (its own time zone), or null. */
  function inputMs(input) {
    if (!input.value) return null;
    const ms = new Date(input.value).getTime();
    return Number.isFinite(ms) ? ms : null;
  }

  // ---------------------------------------------------------------------- api
  class ApiError extends Error {
    constructor(status, body) {
      super(body.message || `HTTP ${status}`);
      this.status = status;
      this.error = body.error || "error";
      this.reason = body.reason || "";
    }
  }

  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    const init = { method, headers, cache: "no-store", credentials: "same-origin" };
    if (method === "POST") {
      headers["Content-Type"] = "application/json";
      headers["X-Requested-With"] = "echomq-console";
      init.body = JSON.stringify(body || {});
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (err) {
      throw new ApiError(0, { error: "network", reason: "network", message: String(err) });
    }
    let data = {};
    try {
      data = await res.json();
    } catch (_) {
      data = {};
    }
    if (!res.ok) throw new ApiError(res.status, data);
    return data;
  }
  const get = (path) => api("GET", path);
  /* A change; on a 401 the login dialog opens and, once logged in, the same change
   * is sent again (the click that raised the dialog is not lost). */
  async function post(path, body) {
    try {
      return await api("POST", path, body);
    } catch (err) {
      if (err.status !== 401 || !(await login())) throw err;
      return api("POST", path, body);
    }
  }

  // ------------------------------------------------------------------- toasts
  /* The queue a hash shows (#/q/<name>...), or "" elsewhere. */
  const hashQueue = (hash) => {
    const m = /^#?\/q\/([^/?]+)/.exec(hash || "");
    return m ? decodeURIComponent(m[1]) : "";
  };
  function toast(kind, title, detail, reason) {
    const data = { queue: hashQueue(location.hash) };
    if (reason) data.reason = reason;
    const box = h("div", { class: `toast ${kind}`, role: "status", dataset: data },
      h("b", {}, title), detail ? h("span", {}, detail) : null);
    $("#toasts").append(box);
    setTimeout(() => box.remove(), kind === "error" ? 9000 : 4000);
    return box;
  }

  function showError(label, err) {
    const reason = err.reason || err.error || "error";
    const kind = err.error === "refused" ? "Refused" : err.status === 0 ? "Offline" : "Error";
    const box = toast("error", `${label}: ${kind}`, null, reason);
    box.append(h("span", {}, h("code", {}, reason), " ", REASONS[reason] || err.message));
  }

  /* Run a verb: a toast on success, the typed reason on refusal. Returns the reply or null. */
  async function act(label, fn, done) {
    try {
      const reply = await fn();
      if (done !== false) toast("ok", done || label);
      return reply;
    } catch (err) {
      showError(label, err);
      return null;
    }
  }

  // ------------------------------------------------------------------- dialog
  /* Open the modal with `body` nodes; resolves true on OK, false on cancel.
   * `canSubmit()` (optional) gates the OK button on every input event. */
  function modal({ title, body, ok = "OK", danger = false, canSubmit }) {
    const dlg = $("#modal");
    $("#modal-title").textContent = title;
    const holder = $("#modal-body");
    fill(holder, ...body);
    const okBtn = $("#modal-ok");
    okBtn.textContent = ok;
    okBtn.className = danger ? "danger solid" : "";
    const gate = () => { okBtn.disabled = canSubmit ? !canSubmit() : false; };
    holder.oninput = gate;
    holder.onchange = gate;
    gate();
    return new Promise((resolve) => {
      const finish = (value) => {
        dlg.onclose = null;
        $("#modal-cancel").onclick = null;
        if (dlg.open) dlg.close();
        resolve(value);
      };
      $("#modal-cancel").onclick = () => finish(false);
      $("#modal-form").onsubmit = (ev) => {
        ev.preventDefault();
        if (!okBtn.disabled) finish(true);
      };
      // a close event of the previous use of this dialog may arrive after it reopened
      dlg.onclose = () => { if (!dlg.open) finish(false); };
      dlg.showModal();
      const first = holder.querySelector("input");
      (first || okBtn).focus();
    });
  }

  /* Send a token to /api/login (which sets the session cookie). */
  async function sendLogin(token, user) {
    await api("POST", "/api/login", user ? { token, user } : { token });
    config.authenticated = true;
    Object.assign(config, await get("/api/config"));
    if (Array.isArray(config.states) && config.states.length) TABS = config.states;
    paintChrome();
  }

  /* Ask for the token until it is right or the operator cancels; true when logged in.
   * Calls made while the dialog is open wait for the same answer. */
  let loginOpen = null;
  function login() {
    if (!loginOpen) loginOpen = askToken().finally(() => { loginOpen = null; });
    return loginOpen;
  }
  async function askToken() {
    let wrong = false;
    for (;;) {
      const input = h("input", { type: "password", id: "token-input", autocomplete: "off" });
      const who = h("input", { type: "text", id: "user-input", autocomplete: "username",
        placeholder: "operator" });
      const ok = await modal({
        title: "Console token",
        ok: "Log in",
        body: [
          h("p", {}, "This console needs the token it was started with (EMQ_CONSOLE_TOKEN or ",
            "--token-file). The page keeps a session cookie for this browser, never the token."),
          wrong ? h("p", { class: "note", id: "token-wrong" }, "That token was refused.") : null,
          h("label", { class: "field" }, h("span", {}, "Token"), input),
          h("label", { class: "field" }, h("span", {}, "Your name (the audit journal names it)"), who),
        ],
        canSubmit: () => input.value !== "",
      });
      if (!ok) return false;
      try {
        await sendLogin(input.value, who.value.trim());
        return true;
      } catch (err) {
        if (err.status !== 401) { showError("Log in", err); return false; }
        wrong = true;
      }
    }
  }

  // ------------------------------------------------------------------- chrome
  function paintChrome() {
    const mode = $("#mode");
    mode.hidden = !config.read_only && !(config.token_required && config.role);
    mode.textContent = config.read_only ? "read-only" : `${config.user || ""} · ${config.role || ""}`;
    mode.dataset.role = config.role || "";
    const btn = $("#token-btn");
    btn.hidden = !config.token_required;
    btn.textContent = config.authenticated ? "Logged in ✓" : "Log in";
    const srv = $("#server");
    srv.textContent = config.server ? `server ${config.server}` : "";
    srv.title = "the Valkey/Redis server this console reads and changes";
  }

  function crumbs(...parts) {
    const nav = $("#crumbs");
    fill(nav);
    parts.forEach((p, i) => {
      if (i) nav.append(h("span", { class: "sep" }, "/"));
      nav.append(p.href ? h("a", { href: p.href }, p.text) : h("span", { class: "here" }, p.text));
    });
  }

  /* The live dot: "on" (beats arrive, the server answers), "down" (the server does
   * not answer), "poll" (no stream: polling), "off" (connecting). */
  const LIVE_TEXT = { on: "live", down: "server down", poll: "polling", off: "connecting" };
  function setLive(state, why) {
    const el = $("#live");
    el.className = `live ${state}`;
    el.dataset.state = state;
    el.textContent = LIVE_TEXT[state];
    el.title = why || "live updates from the server";
  }

  /* A banner for a failed re-read: shown in place (a poll would otherwise toast every
   * few seconds while the server is away), cleared by the next good read. */
  function problemBanner() {
    const el = h("div", { class: "note problem", hidden: true, role: "alert" });
    return {
      el,
      show(err) {
        el.textContent = `Cannot read from the console: ${err.reason || err.error || ""} ${err.message}`;
        el.hidden = false;
      },
      clear() { el.hidden = true; },
    };
  }

  /* What the user's role allows: a viewer reads; an operator acts; an admin alone
   * obliterates and changes limits (the server checks each change the same way). */
  const mayAct = () => !config.read_only && config.role !== "viewer";
  const mayAdmin = () => mayAct() && (config.role === undefined || config.role === "admin");
  function notAllowed(admin) {
    if (config.read_only) return "read-only console";
    if (!mayAct()) return "a viewer reads only";
    return admin && !mayAdmin() ? "an admin's verb (you are an operator)" : null;
  }

  /* A write button: disabled (with a reason) where the console or the role forbids it;
   * `admin: true` marks an admin's verb. */
  function verb(label, onclick, cls = "", attrs = {}) {
    const { admin, ...rest } = attrs;
    const why = notAllowed(admin);
    return h("button", {
      type: "button", class: cls, onclick,
      disabled: why !== null, title: why, "data-admin": admin ? "1" : null, ...rest,
      ...(rest.disabled !== undefined ? { disabled: why !== null || rest.disabled } : {}),
    }, label);
  }

  /* Live updates: an event stream plus a slow poll, both calling `refresh` (coalesced).
   * The stream beats once a second with the server's health; the dot turns off when
   * no beat came for LIVE_STALE_MS. A stream the console refuses (too many from this
   * browser, or a closed stream) falls back to polling every FALLBACK_POLL_MS, with
   * /api/health, and tries the stream again after STREAM_RETRY_MS. */
  function liveView(streamPath, refresh, onEvent) {
    let pending = null;
    let stopped = false;
    let source = null;
    let lastBeat = 0;
    let serverUp = true;
    let polling = false;
    let pollTimer = null;
    let retryTimer = null;
    const soon = () => {
      if (pending || stopped) return;
      pending = setTimeout(() => { pending = null; if (!stopped) refresh(); }, 400);
    };
    const beat = (up) => { lastBeat = Date.now(); serverUp = up; paint(); };
    function paint() {
      if (stopped) return;
      if (polling) setLive(serverUp ? "poll" : "down",
        serverUp ? "no live stream: polling every 2 s" : "the server does not answer");
      else if (Date.now() - lastBeat > LIVE_STALE_MS) setLive("off", "no beat from the console");
      else setLive(serverUp ? "on" : "down", serverUp ? "live" : "the server does not answer");
    }
    async function pollHealth() {
      try { beat((await get("/api/health")).redis); } catch (_) { beat(false); }
      if (serverUp && !document.hidden) refresh();
    }
    function fallBack() {
      if (polling || stopped) return;
      polling = true;
      if (source) source.close();
      source = null;
      pollHealth();
      pollTimer = setInterval(pollHealth, FALLBACK_POLL_MS);
      retryTimer = setTimeout(() => {
        clearInterval(pollTimer);
        polling = false;
        open();
      }, STREAM_RETRY_MS);
      paint();
    }
    function open() {
      if (stopped) return;
      source = new EventSource(streamPath);
      source.addEventListener("beat", (msg) => {
        try { beat(JSON.parse(msg.data).redis !== false); } catch (_) { beat(true); }
      });
      source.onopen = () => beat(true);
      source.onerror = () => {
        // a closed source was refused (429/503/401): the browser will not retry it
        if (source && source.readyState === EventSource.CLOSED) fallBack();
        else paint();
      };
      source.onmessage = (msg) => {
        lastBeat = Date.now();
        let event = null;
        try { event = JSON.parse(msg.data); } catch (_) { return; }
        if (onEvent) onEvent(event);
        soon();
      };
    }
    open();
    const watchdog = setInterval(paint, 500);
    const timer = setInterval(() => { if (!document.hidden && !polling) refresh(); }, POLL_MS);
    return {
      soon,
      stop() {
        stopped = true;
        if (source) source.close();
        clearInterval(timer);
        clearInterval(watchdog);
        clearInterval(pollTimer);
        clearTimeout(retryTimer);
        clearTimeout(pending);
        setLive("off");
      },
    };
  }

  // ---------------------------------------------------------------- queues view
  function queuesView(root) {
    crumbs({ text: "Queues" });
    const count = h("span", { class: "sub" });
    const holder = h("div", { class: "panel flush" });
    root.append(h("div", { class: "head" }, h("h1", {}, "Queues"), count), holder);

    async function refresh() {
      let data;
      try {
        data = await get("/api/queues");
      } catch (err) {
        fill(holder, h("div", { class: "empty" }, `Cannot list queues: ${err.message}`));
        return;
      }
      const n = data.queues.length;
      count.textContent = `${n} queue${n === 1 ? "" : "s"}${data.complete ? "" : " found so far"}`;
      if (!n) {
        fill(holder, h("div", { class: "empty" },
          "No queues yet. A queue shows up here once it holds a key."));
        return;
      }
      const cols = [...STATES, ...EXTRA_CARDS, "completed", "failed"];
      const head = h("tr", {}, h("th", {}, "Queue"), h("th", {}, "State"),
        h("th", { class: "num" }, "workers"),
        cols.map((c) => h("th", { class: "num", title: COL_TITLES[c] || null }, COL_LABELS[c] || c)));
      const rows = data.queues.map((q) => h("tr", { dataset: { queue: q.name } },
        h("td", {}, h("a", { href: qlink(q.name), class: "mono" }, q.name)),
        h("td", {}, stateBadge(q.paused),
          q.stranded ? h("span", { class: "badge warn", dataset: { stranded: "1" },
            title: "jobs are pending and no live worker serves this queue" }, "no workers") : null),
        h("td", { class: `num${q.workers ? "" : " zero"}`, dataset: { col: "workers" } }, fmt(q.workers)),
        cols.map((c) => h("td", { class: `num${q.counts[c] ? "" : " zero"}`, dataset: { col: c } },
          fmt(q.counts[c])))));
      fill(holder, h("table", { class: "queues" }, h("thead", {}, head), h("tbody", {}, rows)));
    }

    refresh();
    return liveView("/api/events", refresh);
  }

  // flow control: "limited until <time>" while a rate window or a handler's hold lets
  // no job start (docs/flow-control.md); "at its cap" when only the cap holds it
  function limitBadge(limited, untilMs) {
    if (!limited) return null;
    return untilMs
      ? h("span", { class: "badge limited", title: isoTime(untilMs), dataset: { limited: "1" } },
        `limited until ${new Date(untilMs).toLocaleTimeString()}`)
      : h("span", { class: "badge limited", dataset: { limited: "1" } }, "at its cap");
  }

  function stateBadge(paused) {
    return paused
      ? h("span", { class: "badge paused", dataset: { paused: "1" } }, "paused")
      : h("span", { class: "badge running" }, "running");
  }

  // ----------------------------------------------------------------- queue view
  function queueView(root, name, params) {
    crumbs({ text: "Queues", href: "#/" }, { text: name });
    const base = qpath(name);
    const size = PAGE_SIZES.includes(Number(params.get("n"))) ? Number(params.get("n")) : PAGE_SIZES[0];
    const view = {
      state: TABS.includes(params.get("state")) ? params.get("state") : "pending",
      size,
      offset: Math.max(0, (Number(params.get("page")) || 1) - 1) * size,
      group: params.get("group") || null,
      find: params.get("find") || "",
      field: params.get("field") || "",
      since: /^\d+$/.test(params.get("since") || "") ? Number(params.get("since")) : null,
      until: /^\d+$/.test(params.get("until") || "") ? Number(params.get("until")) : null,
      cursor: 0,
      found: [],
      groupsSort: "depth",
      groupsDesc: true,
      groupsFilter: "",
      groupsOffset: 0,
      summary: null,
      stopped: false,
      draining: false,
      range: HISTORY_RANGES.includes(params.get("range")) ? params.get("range") : "1h",
      history: null,
    };

    /* The tab, page, lane and search live in the URL (replaced, not pushed). */
    function syncUrl() {
      const q = new URLSearchParams();
      if (view.state !== "pending") q.set("state", view.state);
      if (view.offset) q.set("page", String(Math.floor(view.offset / view.size) + 1));
      if (view.size !== PAGE_SIZES[0]) q.set("n", String(view.size));
      if (view.range !== "1h") q.set("range", view.range);
      if (view.group) q.set("group", view.group);
      if (view.find) q.set("find", view.find);
      if (view.field) q.set("field", view.field);
      if (view.since !== null) q.set("since", String(view.since));
      if (view.until !== null) q.set("until", String(view.until));
      const text = q.toString();
      history.replaceState(null, "", `${qlink(name)}${text ? `?${text}` : ""}`);
    }

    const badge = h("span");
    const actions = h("div", { class: "actions" });
    const problem = problemBanner();
    const oblit = h("div", { class: "panel", hidden: true });
    const cards = h("div", { class: "cards" });
    const totals = h("span", { class: "sub" });
    const charts = h("div", { class: "charts", id: "history-charts" });
    const rangeButtons = HISTORY_RANGES.map((r) => h("button", { type: "button", class: "ghost small range",
      "data-range": r, "aria-pressed": String(r === view.range),
      onclick: () => { view.range = r; syncUrl(); paintRanges(); loadHistory(); } }, RANGE_LABELS[r]));
    const rangeBar = h("div", { class: "ranges", role: "group", "aria-label": "history range" }, rangeButtons);
    function paintRanges() {
      for (const b of rangeButtons) b.setAttribute("aria-pressed", String(b.dataset.range === view.range));
    }
    const events = h("ul", { class: "events" }, h("li", { class: "none" }, "Waiting for events…"));
    const groups = h("div");
    const groupsPager = h("div", { class: "pager" });
    const groupsTotal = h("span", { class: "sub", id: "groups-total" });
    const groupsFilterInput = h("input", { type: "search", id: "groups-filter", placeholder: "filter groups by name",
      "aria-label": "filter groups by name" });
    const groupsFilterBar = h("form", { class: "inline findbar", id: "groups-filter-form", hidden: true,
      onsubmit: (ev) => { ev.preventDefault(); view.groupsFilter = groupsFilterInput.value.trim(); view.groupsOffset = 0; loadGroups(); } },
      groupsFilterInput, h("button", { type: "submit", class: "ghost small", id: "btn-groups-filter" }, "Filter"));
    const repeats = h("div");
    const workers = h("div", { id: "workers" });
    const audit = h("div", { id: "audit" });
    const bulkPanel = h("div", { class: "panel", id: "bulk-panel", hidden: true });
    const tabs = h("div", { class: "tabs" });
    const jobs = h("div");
    const pager = h("div", { class: "pager" });
    const findInput = h("input", { type: "search", id: "find-text", value: view.find,
      placeholder: "find: a job id, or text in name, group, error or payload" });
    const findField = h("select", { id: "find-field", "aria-label": "where to look" },
      h("option", { value: "" }, "anywhere"),
      ["id", "name", "group", "error", "payload"].map((f) =>
        h("option", { value: f, selected: view.field === f }, f)));
    /* a datetime-local input's value for ms (local time), and back */
    const localValue = (ms) => {
      if (ms === null) return "";
      const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
      return d.toISOString().slice(0, 16);
    };
    const findSince = h("input", { type: "datetime-local", id: "find-since", value: localValue(view.since),
      title: "created from", "aria-label": "created from" });
    const findUntil = h("input", { type: "datetime-local", id: "find-until", value: localValue(view.until),
      title: "created until", "aria-label": "created until" });
    const sizeSelect = h("select", { id: "page-size", "aria-label": "jobs per page",
      onchange: () => { view.size = Number(sizeSelect.value); view.offset = 0; syncUrl(); loadJobs(); } },
      PAGE_SIZES.map((n) => h("option", { value: n, selected: n === view.size }, `${n} per page`)));
    const findBar = h("form", { class: "inline findbar", id: "find-form",
      onsubmit: (ev) => { ev.preventDefault(); startFind(); } },
      findInput, findField, findSince, findUntil,
      h("button", { type: "submit", class: "ghost small", id: "btn-find" }, "Find"),
      h("button", { type: "button", class: "ghost small", id: "btn-clear-find",
        onclick: () => { findInput.value = ""; findSince.value = ""; findUntil.value = ""; startFind(); } }, "Clear"),
      sizeSelect,
      verb("Bulk…", () => openBulk(), "ghost small", { id: "btn-bulk",
        title: "act on every job of this tab matching a filter" }));
    const laneNote = h("div", { class: "note lane-note", id: "lane-note", hidden: true });
    const missing = h("div", { class: "panel empty", id: "no-such-queue", hidden: true });
    const content = h("div");

    const health = h("div", { class: "health", id: "health", role: "status" });
    root.append(
      h("div", { class: "head" }, h("h1", { class: "mono" }, name), badge, actions),
      health,
      problem.el,
      missing,
      content);
    content.append(
      oblit,
      bulkPanel,
      cards,
      h("div", { class: "grid2" },
        h("section", { class: "panel", id: "history" },
          h("h2", {}, "History ", totals), rangeBar, charts,
          h("div", { class: "legend" }, h("span", {}, h("i", { class: "c" }), "completed"),
            h("span", {}, h("i", { class: "f" }), "dead-lettered"),
            h("span", { class: "sub" }, "wait: enqueue to first start · run: last start to end"))),
        h("section", { class: "panel" }, h("h2", {}, "Live events"), events)),
      h("div", { class: "gap" }),
      h("section", { class: "panel flush" }, h("h2", {}, "Groups ", groupsTotal), groupsFilterBar, groups, groupsPager),
      h("section", { class: "panel flush jobs" }, h("h2", {}, "Jobs"), tabs, findBar, laneNote, jobs, pager),
      h("section", { class: "panel flush" }, h("h2", {}, "Repeatables"), repeats),
      h("section", { class: "panel flush" }, h("h2", {}, "Workers ",
        h("span", { class: "sub" }, "live, from the registry each worker writes on its beat")), workers),
      h("section", { class: "panel flush" }, h("h2", {}, "Audit journal ",
        h("span", { class: "sub" }, "the newest 50 operator acts")), audit),
    );

    // --- queue-scope verbs
    async function pauseOrResume() {
      const paused = view.summary && view.summary.paused;
      const ok = await act(paused ? "Resume" : "Pause",
        () => post(`${base}/${paused ? "resume" : "pause"}`),
        paused ? `Queue ${name} resumed` : `Queue ${name} paused`);
      if (ok) refresh();
    }

    /* What a drain or an obliterate does to flows that cross this queue: a note in the
     * dialog, filled when the bounded read answers (the dialog does not wait for it;
     * it stays hidden when no flow crosses the queue or the read failed). */
    function flowNote(outcome) {
      const note = h("p", { class: "note", id: "flow-impact", hidden: true });
      get(`${base}/flow_impact`).then((f) => {
        const parts = [];
        if (f.waiting) {
          parts.push(`${fmt(f.waiting)} waiting flow parent(s) will be removed (their children keep running)`);
        }
        if (f.children) {
          parts.push(`${fmt(f.children)} flow child(ren)${f.exact ? "" : ` (of ${fmt(f.examined)} jobs examined)`} `
            + `will resolve their parents as ${outcome}, ${fmt(f.elsewhere)} of them in another queue`);
        }
        if (parts.length) {
          fill(note, `Flows: ${parts.join("; ")}.`);
          note.hidden = false;
        }
      }, () => {});
      return note;
    }

    async function drain() {
      if (view.draining) return;
      const flows = flowNote("drained");
      const sched = h("input", { type: "checkbox", id: "drain-schedule" });
      const budget = h("input", { type: "number", id: "drain-budget", min: 1, max: 10000, value: DRAIN_BUDGET });
      const c = view.summary ? view.summary.counts : {};
      const go = await modal({
        title: `Drain ${name}?`,
        ok: "Drain",
        danger: true,
        canSubmit: () => Number(budget.value) >= 1 && Number(budget.value) <= 10000,
        body: [
          h("p", {}, `Deletes every pending job (${fmt(c.pending)}, every lane included) with its logs. `,
            "Jobs in flight and the repeat registry survive."),
          flows,
          h("label", { class: "check" }, sched, `Also delete the scheduled jobs (${fmt(c.scheduled)})`),
          h("label", { class: "field" }, h("span", {}, "Jobs deleted per server call"), budget),
        ],
      });
      if (!go || view.draining) return;
      await runDrain(sched.checked, (c.pending || 0) + (sched.checked ? c.scheduled || 0 : 0),
        Number(budget.value));
    }

    /* Drain in bounded calls (a budget of jobs each), like obliterate: a progress bar,
     * and the button disabled until the last call answered (no second drain). */
    async function runDrain(includeSchedule, start, budget) {
      view.draining = true;
      const button = $("#btn-drain");
      if (button) button.disabled = true;
      const bar = h("div");
      const label = h("span", { class: "sub", id: "drain-status" }, "Starting…");
      fill(oblit, h("h2", {}, "Draining"),
        h("div", { class: "oblit" }, h("div", { class: "progress danger", id: "drain-progress" }, bar), label));
      oblit.hidden = false;
      let calls = 0;
      let drained = 0;
      try {
        for (;;) {
          let reply;
          try {
            reply = await post(`${base}/drain`, { include_schedule: includeSchedule, budget });
          } catch (err) {
            showError("Drain", err);
            break;
          }
          calls += 1;
          drained += reply.drained;
          const left = reply.remaining.pending + (includeSchedule ? reply.remaining.scheduled : 0);
          const total = Math.max(start, drained + left);
          const share = reply.done ? 1 : total ? Math.min(0.99, drained / total) : 0.5;
          bar.style.width = `${Math.round(share * 100)}%`;
          label.textContent = reply.done
            ? `Drained ${fmt(drained)} in ${calls} call${calls === 1 ? "" : "s"}`
            : `${fmt(drained)} of ${fmt(total)} jobs deleted · call ${calls}`;
          if (reply.done) {
            toast("ok", `Drained ${fmt(drained)} job${drained === 1 ? "" : "s"}`, `${calls} bounded call${calls === 1 ? "" : "s"}`);
            break;
          }
          if (view.stopped) break; // the page was left: stop between two bounded calls
        }
      } finally {
        view.draining = false;
        const again = $("#btn-drain");
        if (again) again.disabled = !mayAct();
        setTimeout(() => { if (!view.draining) oblit.hidden = true; }, 1500);
        if (!view.stopped) refresh();
      }
    }

    async function obliterate() {
      const s = view.summary || { counts: {}, paused: false };
      const force = h("input", { type: "checkbox", id: "oblit-force" });
      const budget = h("input", { type: "number", id: "oblit-budget", min: 1, max: 10000, value: 1000 });
      const typed = h("input", { type: "text", id: "oblit-confirm", autocomplete: "off", placeholder: name });
      const flows = flowNote("obliterated");
      const go = await modal({
        title: `Obliterate ${name}?`,
        ok: "Obliterate",
        danger: true,
        canSubmit: () => typed.value === name && Number(budget.value) >= 1,
        body: [
          h("p", {}, "Deletes every job, log, lane, repeat record, metric and setting of this queue. ",
            "It cannot be undone."),
          s.paused ? null : h("p", { class: "note" }, "The queue is running: the server refuses to ",
            "obliterate a queue that is not paused. Pause it first."),
          flows,
          h("label", { class: "check" }, force, `Force: also delete the ${fmt(s.counts.active)} job(s) in flight`),
          h("label", { class: "field" }, h("span", {}, "Jobs deleted per server call"), budget),
          h("label", { class: "field" }, h("span", {}, `Type the queue name (${name}) to confirm`), typed),
        ],
      });
      if (!go) return;
      await runObliterate(force.checked, Number(budget.value));
    }

    async function runObliterate(force, budget) {
      const c = (view.summary && view.summary.counts) || {};
      const start = STATES.reduce((sum, st) => sum + (c[st] || 0), 0);
      const bar = h("div");
      const label = h("span", { class: "sub", id: "oblit-status" }, "Starting…");
      fill(oblit, h("h2", {}, "Obliterating"),
        h("div", { class: "oblit" }, h("div", { class: "progress danger", id: "oblit-progress" }, bar), label));
      oblit.hidden = false;
      let calls = 0;
      for (;;) {
        let reply;
        try {
          reply = await post(`${base}/obliterate`, { force, budget });
        } catch (err) {
          showError("Obliterate", err);
          oblit.hidden = true;
          refresh();
          return;
        }
        calls += 1;
        const left = STATES.reduce((sum, st) => sum + (reply.remaining[st] || 0), 0);
        const share = reply.done ? 1 : start ? Math.min(0.99, 1 - left / start) : 0.5;
        bar.style.width = `${Math.round(share * 100)}%`;
        label.textContent = reply.done
          ? `Done in ${calls} call${calls === 1 ? "" : "s"}`
          : `${fmt(start - left)} of ${fmt(start)} jobs deleted · call ${calls}`;
        if (reply.done) break;
      }
      toast("ok", `Queue ${name} obliterated`, `${calls} bounded call${calls === 1 ? "" : "s"}`);
      setTimeout(() => { if (!view.stopped) location.hash = "#/"; }, 900);
    }

    // --- group verbs
    async function groupVerb(g, verbName, body, done) {
      const reply = await act(`${verbName} ${g}`,
        () => post(`${base}/groups/${enc(g)}/${verbName}`, body), done);
      refresh();
      return reply;
    }

    async function groupNumber(g, what, current) {
      const input = h("input", { type: "number", min: 1, id: `group-${what}`,
        value: current === null || current === undefined ? "" : current });
      const body = [h("label", { class: "field" },
        h("span", {}, what === "limit" ? "Jobs of this group in flight at once (empty: no limit)"
          : "Jobs served per turn of the ring"), input)];
      const go = await modal({
        title: `${what === "limit" ? "Concurrency limit" : "Weight"} of ${g}`,
        ok: "Set",
        body,
        canSubmit: () => (what === "limit" && input.value === "") || Number(input.value) >= 1,
      });
      if (!go) return;
      const value = input.value === "" ? null : Number(input.value);
      await groupVerb(g, what, { [what]: value }, `${g}: ${what} ${value === null ? "cleared" : `set to ${value}`}`);
    }

    async function groupDrain(g, depth) {
      const go = await modal({
        title: `Drain group ${g}?`, ok: "Drain", danger: true,
        body: [h("p", {}, `Deletes the ${fmt(depth)} job(s) waiting in this group's lane, with their logs.`)],
      });
      if (!go) return;
      const reply = await groupVerb(g, "drain", {}, false);
      if (reply) toast("ok", `Drained ${fmt(reply.drained)} job(s) from ${g}`);
    }

    // --- workers and the audit journal
    function paintWorkers(list, now) {
      if (!list.length) {
        fill(workers, h("div", { class: "empty" }, "No live workers: none has beaten in the last few seconds."));
        return;
      }
      const head = h("tr", {}, ["Worker", "Host", "PID", "Queues", "Jobs", "Concurrency", "Batch", "Done", "Failed attempts", "Up", "Last beat", "In hand"]
        .map((t) => h("th", {}, t)));
      const rows = list.map((w) => h("tr", { dataset: { worker: w.id } },
        h("td", { class: "mono" }, w.id),
        h("td", { class: "mono" }, w.host),
        h("td", { class: "num" }, String(w.pid)),
        h("td", { class: "mono" }, w.queues.join(", ") + (w.order ? ` (${w.order})` : "")),
        h("td", { class: "num" }, fmt(w.jobs)),
        h("td", { class: "num" }, fmt(w.concurrency)),
        h("td", { class: "mono" }, w.batch || "-"),
        h("td", { class: "num" }, fmt(w.completed)),
        h("td", { class: "num" }, fmt(w.failed)),
        h("td", { title: isoTime(w.started_ms) }, span(w.beat_ms - w.started_ms)),
        h("td", { title: isoTime(w.beat_ms) }, `${span(w.age_ms)} ago`),
        h("td", {}, w.job_ids.map((id) => [h("a", { href: jlink(name, id), class: "mono" }, id), " "]))));
      fill(workers, h("table", {}, h("thead", {}, head), h("tbody", {}, rows)));
    }

    function paintAudit(list) {
      if (!list.length) {
        fill(audit, h("div", { class: "empty" }, "No operator act journaled yet."));
        return;
      }
      const head = h("tr", {}, ["Time (UTC)", "Verb", "Arguments", "Outcome", "Count", "Actor"].map((t) => h("th", {}, t)));
      const rows = list.map((e) => h("tr", { dataset: { entry: e.id } },
        h("td", { class: "mono" }, isoTime(e.time_ms).replace("T", " ").replace("Z", "")),
        h("td", { class: "mono" }, e.verb),
        h("td", { class: "mono args" }, JSON.stringify(e.args)),
        h("td", {}, e.outcome),
        h("td", { class: "num" }, fmt(e.count)),
        h("td", { class: "mono" }, e.actor)));
      fill(audit, h("table", {}, h("thead", {}, head), h("tbody", {}, rows)));
    }

    // --- bulk verbs by filter: count (a dry run), confirm, then run with a progress bar
    const BULK_BY_STATE = {
      pending: [["remove", "Remove"]],
      scheduled: [["promote", "Run now (promote)"], ["remove", "Remove"]],
      dead: [["reprocess", "Reprocess"], ["remove", "Remove"], ["clean", "Clean (older than)"]],
      active: [],
      completed: [["remove", "Remove"]],
    };

    /* Drive one bulk verb to its end in bounded pieces (each one request of at most a
     * few server calls); `onPiece(total)` after each. Returns the total or null. */
    async function runBulk(verbName, body, onPiece) {
      let total = 0;
      let cursor = null;
      for (;;) {
        const reply = await post(`${base}/bulk/${verbName}`, cursor ? { ...body, cursor } : body);
        total += reply.matched;
        if (onPiece) onPiece(total, reply);
        if (reply.done || view.stopped) return total;
        cursor = reply.cursor;
      }
    }

    async function openBulk() {
      const choices = BULK_BY_STATE[view.state];
      if (!choices.length) {
        toast("error", "Bulk: nothing to do",
          "active jobs are held by their workers: cancel them one by one", "locked");
        return;
      }
      const verbSel = h("select", { id: "bulk-verb" }, choices.map(([v, label]) => h("option", { value: v }, label)));
      const fname = h("input", { type: "text", id: "bulk-name", placeholder: "any" });
      const fgroup = h("input", { type: "text", id: "bulk-group", placeholder: "any", value: view.group || "" });
      const ferror = h("input", { type: "text", id: "bulk-error", placeholder: "any" });
      const since = h("input", { type: "datetime-local", id: "bulk-since" });
      const until = h("input", { type: "datetime-local", id: "bulk-until" });
      const age = h("input", { type: "number", id: "bulk-age", min: 0, value: 3600 });
      const countText = h("span", { class: "sub", id: "bulk-count" }, "Count the matching jobs first.");
      let counted = null;
      const filterRows = h("div", {},
        h("label", { class: "field" }, h("span", {}, "Job name (exactly)"), fname),
        h("label", { class: "field" }, h("span", {}, "Group (exactly)"), fgroup),
        h("label", { class: "field" }, h("span", {}, "Last error contains"), ferror),
        h("label", { class: "field" }, h("span", {}, "Created from"), since),
        h("label", { class: "field" }, h("span", {}, "Created until"), until));
      const ageRow = h("label", { class: "field", hidden: true }, h("span", {}, "Dead for more than (seconds)"), age);
      const body = () => {
        if (verbSel.value === "clean") return { older_than_ms: Math.max(0, Number(age.value) || 0) * 1000 };
        const b = {};
        if (verbSel.value === "remove") b.state = view.state;
        if (fname.value.trim()) b.name = fname.value.trim();
        if (fgroup.value.trim()) b.group = fgroup.value.trim();
        if (ferror.value) b.error = ferror.value;
        const lo = inputMs(since);
        const hi = inputMs(until);
        if (lo !== null) b.since_ms = lo;
        if (hi !== null) b.until_ms = hi;
        return b;
      };
      const reset = () => {
        counted = null;
        countText.textContent = "Count the matching jobs first.";
        const clean = verbSel.value === "clean";
        filterRows.hidden = clean;
        ageRow.hidden = !clean;
      };
      const countBtn = h("button", { type: "button", class: "ghost small", id: "bulk-dry-run",
        onclick: async () => {
          countText.textContent = "Counting…";
          try {
            const n = await runBulk(verbSel.value, { ...body(), dry_run: true },
              (t) => { countText.textContent = `Counting… ${fmt(t)} so far`; });
            counted = n;
            countText.textContent = `${fmt(n)} job${n === 1 ? "" : "s"} match (a dry run: nothing changed).`;
          } catch (err) {
            counted = null;
            countText.textContent = "";
            showError("Count", err);
          }
          $("#modal-body").dispatchEvent(new Event("input"));
        } }, "Count matching jobs");
      const watch = (el) => el.addEventListener("input", reset);
      [verbSel, fname, fgroup, ferror, since, until, age].forEach(watch);
      verbSel.addEventListener("change", reset);
      reset();
      const go = await modal({
        title: `Bulk: ${view.state} jobs of ${name}`,
        ok: "Run",
        danger: true,
        canSubmit: () => counted !== null && counted > 0,
        body: [
          h("p", {}, "Acts on every matching job, in bounded server calls, each journaled. ",
            "Count first: the count is a dry run over the same filter."),
          h("label", { class: "field" }, h("span", {}, "Verb"), verbSel),
          filterRows, ageRow,
          h("div", { class: "inline" }, countBtn, countText),
        ],
      });
      if (!go) return;
      const label = choices.find(([v]) => v === verbSel.value)[1];
      const want = counted;
      const bar = h("div");
      const status = h("span", { class: "sub", id: "bulk-status" }, "Starting…");
      fill(bulkPanel, h("h2", {}, `${label}: ${view.state} jobs`),
        h("div", { class: "oblit" }, h("div", { class: "progress", id: "bulk-progress" }, bar), status));
      bulkPanel.hidden = false;
      try {
        const done = await runBulk(verbSel.value, body(), (t, reply) => {
          bar.style.width = `${Math.round(Math.min(1, want ? t / want : 1) * 100)}%`;
          status.textContent = `${fmt(t)} of ${fmt(want)} job${want === 1 ? "" : "s"}${reply.locked ? ` · ${fmt(reply.locked)} held by a worker, skipped` : ""}`;
        });
        bar.style.width = "100%";
        status.textContent = `Done: ${fmt(done)} job${done === 1 ? "" : "s"}`;
        toast("ok", `${label}: ${fmt(done)} job${done === 1 ? "" : "s"}`);
      } catch (err) {
        showError(label, err);
      }
      setTimeout(() => { bulkPanel.hidden = true; }, 4000);
      refresh();
    }

    // --- painting
    /* Health at a glance, at the top of the page: live workers, the oldest pending
     * job's wait, the gate, and the one warning an operator must not scroll to. */
    function paintHealth(s) {
      const items = [
        h("span", { class: "item", dataset: { health: "workers" } },
          h("b", {}, fmt(s.workers)), ` live worker${s.workers === 1 ? "" : "s"}`),
        h("span", { class: "item", dataset: { health: "oldest" },
          title: "how long the job at the head of the backlog has waited" },
          "oldest pending ", h("b", {}, s.latency_ms === null ? "none" : span(s.latency_ms))),
        s.paused ? h("span", { class: "item badge paused" }, "paused: claims wait") : null,
      ];
      if (s.stranded) {
        items.unshift(h("span", { class: "item warn", id: "health-warning" },
          `${fmt(s.counts.pending)} pending but no live workers`));
      }
      fill(health, ...items);
    }

    function paintHead(s) {
      missing.hidden = s.exists !== false;
      content.hidden = s.exists === false;
      if (s.exists === false) {
        // a mistyped name is not a live empty queue: no verbs, and say which server
        fill(badge, h("span", { class: "badge" }, "no such queue"));
        fill(actions);
        fill(missing, `No queue named ${name} on ${config.server || "this server"}: it has no jobs, `,
          "lanes, repeatables, metrics or settings. ", h("a", { href: "#/" }, "All queues"));
        return;
      }
      fill(badge, stateBadge(s.paused), limitBadge(s.rate_limited, s.limited_until_ms));
      paintHealth(s);
      fill(actions,
        verb(s.paused ? "Resume" : "Pause", pauseOrResume, s.paused ? "" : "ghost", { id: "btn-pause" }),
        verb("Drain…", drain, "danger", { id: "btn-drain", disabled: !!view.draining }),
        verb("Obliterate…", obliterate, "danger", { id: "btn-obliterate", admin: true }),
      );
      const labels = [...STATES, ...EXTRA_CARDS, "completed", "failed"];
      fill(cards, ...labels.map((st) => {
        const selectable = STATES.includes(st) || EXTRA_CARDS.includes(st);
        return h(selectable ? "button" : "div", {
          type: selectable ? "button" : null,
          class: `card${selectable ? "" : " static"}${view.state === st ? " selected" : ""}`,
          dataset: { state: st },
          onclick: selectable ? () => selectState(st) : null,
        }, h("div", { class: "label", title: COL_TITLES[st] || null }, COL_LABELS[st] || st),
        h("div", { class: "value" }, fmt(s.counts[st])));
      }), h("div", { class: "card static", id: "latency", dataset: { state: "latency" },
        title: "how long the job at the head of the backlog has waited" },
      h("div", { class: "label" }, "latency"), h("div", { class: "value" }, span(s.latency_ms))));
      fill(tabs, ...TABS.map((st) => h("button", {
        type: "button", class: `tab${view.state === st ? " selected" : ""}`, dataset: { state: st },
        title: st === "completed" ? "completed jobs kept as history (a retention or keep_ms)"
          : st === "waiting_children" ? "flow parents waiting for their children" : null,
        onclick: () => selectState(st),
      }, st, h("span", { class: "n" }, fmt(st === "completed" ? s.counts.kept : s.counts[st])))));
    }

    function selectState(st) {
      view.state = st;
      view.offset = 0;
      if (st !== "pending") view.group = null;
      view.found = [];
      view.cursor = 0;
      syncUrl();
      if (view.summary) paintHead(view.summary);
      loadJobs();
    }

    function selectGroup(g) {
      view.state = "pending";
      view.group = g;
      view.offset = 0;
      syncUrl();
      if (view.summary) paintHead(view.summary);
      loadJobs();
    }

    const searching = () => Boolean(view.find) || view.since !== null || view.until !== null;

    function startFind() {
      view.find = findInput.value.trim();
      view.field = findField.value;
      view.since = inputMs(findSince);
      // "until" names a minute: every job of that minute is in
      view.until = inputMs(findUntil) === null ? null : inputMs(findUntil) + 59999;
      view.offset = 0;
      view.cursor = 0;
      view.found = [];
      syncUrl();
      if (/^JOB[0-9A-Za-z]{11}$/.test(view.find) && (view.field === "" || view.field === "id")) {
        location.hash = jlink(name, view.find); // jump to the job by its id
        return;
      }
      loadJobs();
    }

    /* The groups table: every lane sorted (deepest first by default, or the column
     * clicked), filtered by name, counted and paged; the console walks the groups in
     * bounded calls and shares the walk between requests for a few seconds. */
    function paintGroupsPager(page) {
      const first = page.matched ? page.offset + 1 : 0;
      const last = Math.min(page.offset + page.groups.length, page.matched);
      fill(groupsPager,
        h("span", { class: "sub", id: "groups-range" },
          `${fmt(first)}–${fmt(last)} of ${fmt(page.matched)}`,
          page.filter ? ` matching “${page.filter}”` : "",
          page.complete ? "" : ` (the first ${fmt(page.total)} groups read)`),
        h("button", { type: "button", class: "ghost small", id: "groups-prev", disabled: page.offset === 0,
          onclick: () => { view.groupsOffset = Math.max(0, page.offset - GROUPS_PAGE); loadGroups(); } }, "‹ Prev"),
        h("button", { type: "button", class: "ghost small", id: "groups-next",
          disabled: page.offset + GROUPS_PAGE >= page.matched,
          onclick: () => { view.groupsOffset = page.offset + GROUPS_PAGE; loadGroups(); } }, "Next ›"));
      groupsPager.hidden = page.matched <= GROUPS_PAGE && page.offset === 0;
      const counted = page.filter
        ? `${fmt(page.matched)} of ${fmt(page.total)} groups match “${page.filter}”`
        : `${fmt(page.total)} group${page.total === 1 ? "" : "s"}`;
      fill(groupsTotal, page.total
        ? `${counted} · ${fmt(page.pending)} pending in lanes · ${fmt(page.in_flight)} in flight · ` +
          `${fmt(page.paused)} paused`
        : "");
    }

    async function loadGroups() {
      try {
        const q = new URLSearchParams({ sort: view.groupsSort, desc: view.groupsDesc ? "1" : "0",
          offset: String(view.groupsOffset), n: String(GROUPS_PAGE) });
        if (view.groupsFilter) q.set("filter", view.groupsFilter);
        const g = await get(`${base}/groups?${q}`);
        if (view.stopped) return;
        view.groupsOffset = g.offset;
        paintGroups(g.groups, g);
        paintGroupsPager(g);
      } catch (err) {
        fill(groups, h("div", { class: "empty" }, `Cannot list groups: ${err.message}`));
      }
    }

    function paintRepeats(list) {
      if (!list.length) {
        fill(repeats, h("div", { class: "empty" }, "No repeatables."));
        return;
      }
      const head = h("tr", {}, ["Name", "Cadence", "Next run", "Made", "Job name", "Group", ""].map((t) => h("th", {}, t)));
      const now = view.summary ? view.summary.now_ms : Date.now();
      const rows = list.map((rep) => h("tr", { dataset: { repeat: rep.name, paused: rep.paused ? "1" : "0" } },
        h("td", { class: "mono" }, rep.name),
        h("td", {}, rep.every_ms !== null ? `every ${fmt(rep.every_ms)} ms` : `cron ${rep.cron}`),
        h("td", { title: isoTime(rep.next_run_ms) }, rep.paused
          ? h("span", { class: "badge paused" }, "paused") : relTime(rep.next_run_ms, now)),
        h("td", { class: "num" }, fmt(rep.count)),
        h("td", {}, rep.job_name || ""),
        h("td", { class: "mono" }, rep.group || "—"),
        h("td", { class: "row-actions" },
          verb("Run now", () => repeatVerb(rep.name, "run"), "ghost small",
            { disabled: rep.paused, title: rep.paused ? "resume it first" : "make one job now" }),
          verb(rep.paused ? "Resume" : "Pause", () => repeatVerb(rep.name, rep.paused ? "resume" : "pause"), "ghost small"),
          verb("Cancel…", () => cancelRepeat(rep.name), "danger small"))));
      fill(repeats, h("table", {}, h("thead", {}, head), h("tbody", {}, rows)));
    }

    async function repeatVerb(rname, verbName) {
      const reply = await act(`${verbName} ${rname}`, () => post(`${base}/repeats/${enc(rname)}/${verbName}`), false);
      if (reply) {
        if (verbName === "run") {
          toast("ok", reply.id ? `Repeatable ${rname} made ${reply.id}` : `Repeatable ${rname}: no job made`,
            reply.id ? null : "paused, gone, or a worker fired it just then");
        } else {
          toast("ok", `Repeatable ${rname} ${verbName === "pause" ? "paused" : "resumed"}`);
        }
      }
      refresh();
    }

    async function cancelRepeat(rname) {
      const go = await modal({
        title: `Cancel repeatable ${rname}?`, ok: "Cancel it", danger: true,
        body: [h("p", {}, "No more jobs are made on its cadence; the jobs it already made stay.")],
      });
      if (!go) return;
      await act("Cancel repeatable", () => post(`${base}/repeats/${enc(rname)}/cancel`), `Repeatable ${rname} cancelled`);
      refresh();
    }

    function paintGroups(list, page) {
      groupsFilterBar.hidden = !page.total;
      if (!list.length) {
        fill(groups, h("div", { class: "empty" }, page.total
          ? `No group matches “${page.filter}”.` : "No groups: every job of this queue is flat."));
        return;
      }
      const cols = [["Group", "name"], ["Depth", "depth"], ["In flight", "in_flight"], ["Limit", "limit"],
        ["Weight", "weight"], ["State", "paused"], ["", null]];
      const head = h("tr", {}, cols.map(([t, key], i) => {
        if (!key) return h("th", {}, t);
        const on = view.groupsSort === key;
        return h("th", { class: `${i >= 1 && i <= 4 ? "num " : ""}sortable${on ? " sorted" : ""}`,
          dataset: { sort: key }, "aria-sort": on ? (view.groupsDesc ? "descending" : "ascending") : null },
        h("button", { type: "button", class: "linklike", title: `sort by ${t.toLowerCase()}`,
          onclick: () => {
            if (on) view.groupsDesc = !view.groupsDesc;
            else { view.groupsSort = key; view.groupsDesc = key !== "name"; }
            view.groupsOffset = 0;
            loadGroups();
          } }, t, on ? (view.groupsDesc ? " ▼" : " ▲") : ""));
      }));
      const rows = list.map((g) => h("tr", { dataset: { group: g.name } },
        h("td", { class: "mono" }, h("a", { href: "#", title: "list this lane's jobs",
          onclick: (ev) => { ev.preventDefault(); selectGroup(g.name); } }, g.name)),
        h("td", { class: "num" }, fmt(g.depth)),
        h("td", { class: "num" }, fmt(g.in_flight)),
        h("td", { class: "num" }, g.limit === null ? "—" : fmt(g.limit)),
        h("td", { class: "num" }, fmt(g.weight)),
        h("td", {}, stateBadge(g.paused), limitBadge(!!g.held_until_ms, g.held_until_ms)),
        h("td", { class: "row-actions" },
          verb(g.paused ? "Resume" : "Pause",
            () => groupVerb(g.name, g.paused ? "resume" : "pause", {}, `Group ${g.name} ${g.paused ? "resumed" : "paused"}`),
            "ghost small"),
          verb("Limit…", () => groupNumber(g.name, "limit", g.limit), "ghost small", { admin: true }),
          verb("Weight…", () => groupNumber(g.name, "weight", g.weight), "ghost small"),
          verb("Drain…", () => groupDrain(g.name, g.depth), "danger small"))));
      fill(groups, h("table", {}, h("thead", {}, head), h("tbody", {}, rows)));
    }

    const TIME_LABEL = { active: "Lease ends", scheduled: "Due", dead: "Died", pending: "Priority", completed: "Finished" };
    const ORDER_TEXT = { run: "in run order", soonest: "soonest first", newest: "newest first" };

    function jobRows(state, list, now) {
      const head = h("tr", {}, h("th", {}, "Job"), h("th", {}, "Name"), h("th", {}, "Group"),
        h("th", { class: "num" }, "Attempts"), h("th", { class: "num" }, "Failures"),
        h("th", {}, "Progress"), h("th", {}, TIME_LABEL[state]), h("th", {}, "Last error"));
      const rows = list.map((j) => h("tr", { dataset: { job: j.id } },
        h("td", {}, h("a", { href: jlink(name, j.id), class: "mono" }, j.id)),
        h("td", {}, j.name || ""),
        h("td", { class: "mono" }, j.group || ""),
        h("td", { class: "num" }, fmt(j.attempts)),
        h("td", { class: "num" }, fmt(j.failures)),
        h("td", {}, progressCell(j.progress)),
        h("td", { title: state === "pending" ? "" : isoTime(j.score) },
          state === "pending" ? String(j.priority) : relTime(j.score, now)),
        h("td", { class: "err", title: j.last_error || "" }, j.last_error || "")));
      return h("table", {}, h("thead", {}, head), h("tbody", {}, rows));
    }

    function paintLaneNote(page) {
      const c = view.summary ? view.summary.counts : null;
      if (page.state !== "pending") { laneNote.hidden = true; return; }
      if (page.group) {
        fill(laneNote, `Lane of group ${page.group}, in run order. `,
          h("a", { href: "#", id: "lane-clear", onclick: (ev) => { ev.preventDefault(); selectGroup(null); } },
            "Back to the flat pending set"));
        laneNote.hidden = false;
        return;
      }
      const inLanes = c ? c.pending - page.total : 0;
      laneNote.hidden = inLanes <= 0;
      if (inLanes > 0) {
        fill(laneNote, `${fmt(inLanes)} more pending job${inLanes === 1 ? "" : "s"} wait in lanes: `,
          "pick a group in the Groups table to list its lane (lanes are listed one at a time).");
      }
    }

    function paintJobs(page) {
      paintLaneNote(page);
      if (!page.jobs.length) {
        fill(jobs, h("div", { class: "empty", id: "jobs-empty" }, `No ${page.state} jobs${page.group ? ` in ${page.group}` : ""}.`,
          page.state === "completed" ? " A completed job is kept only when the queue keeps history (q.set_retention, emq retention) or the job asked for it (keep_ms)." : ""));
      } else {
        fill(jobs, jobRows(page.state, page.jobs, page.now_ms));
      }
      if (page.total > 0 && page.offset >= page.total) {
        // past the end (a deep link, or the set shrank under the page): the last page
        view.offset = Math.floor((page.total - 1) / view.size) * view.size;
        syncUrl();
        loadJobs();
        return;
      }
      const first = page.total ? Math.min(page.offset + 1, page.total) : 0;
      const last = Math.min(page.offset + page.jobs.length, page.total);
      fill(pager,
        h("span", { class: "sub", id: "page-range" }, `${fmt(first)}–${fmt(last)} of ${fmt(page.total)}, ${ORDER_TEXT[page.order]}`),
        h("button", { type: "button", class: "ghost small", id: "page-prev", disabled: page.offset === 0,
          onclick: () => { view.offset = Math.max(0, view.offset - view.size); syncUrl(); loadJobs(); } }, "‹ Prev"),
        h("button", { type: "button", class: "ghost small", id: "page-next", disabled: page.offset + view.size >= page.total,
          onclick: () => { view.offset += view.size; syncUrl(); loadJobs(); } }, "Next ›"));
    }

    /* A search is bounded per call: each step examines at most a budget of jobs and
     * returns a cursor; "Search further" takes the next step. */
    function paintFound(found) {
      laneNote.hidden = true;
      fill(jobs, view.found.length ? jobRows(found.state, view.found, found.now_ms)
        : h("div", { class: "empty" }, `No ${found.state} job matches ${found.text ? `“${found.text}”` : "the time range"} so far.`));
      /* honest at scale: "every job" only when the walk reached its end; else how far
       * it went of how many (pending: the flat set, then every lane) */
      const done = found.cursor === null;
      const of = ` of ${fmt(found.total)}${found.state === "pending" && !found.group ? " (flat and every lane)" : ""}`;
      fill(pager,
        h("span", { class: "sub", id: "find-status" },
          `${fmt(view.found.length)} match${view.found.length === 1 ? "" : "es"}, `,
          done ? `every job examined${of}` : `${fmt(found.cursor)}${of} examined so far`),
        h("button", { type: "button", class: "ghost small", id: "find-more", disabled: done,
          onclick: () => { view.cursor = found.cursor; loadJobs(true); } }, "Search further ›"));
    }

    async function loadJobs(more) {
      const key = () => `${view.state}|${view.group}|${view.find}|${view.field}|${view.since}|${view.until}`;
      const want = key();
      try {
        if (searching()) {
          if (!more) { view.found = []; view.cursor = 0; }
          const fields = view.field ? `&field=${enc(view.field)}` : "";
          const group = view.group ? `&group=${enc(view.group)}` : "";
          const text = view.find ? `&q=${enc(view.find)}` : "";
          const range = (view.since !== null ? `&since=${view.since}` : "") + (view.until !== null ? `&until=${view.until}` : "");
          const found = await get(`${base}/jobs?state=${view.state}${text}${fields}${group}${range}&n=${view.size}&cursor=${view.cursor}`);
          if (view.stopped || want !== key()) return;
          view.found = view.found.concat(found.jobs);
          paintFound(found);
          return;
        }
        const group = view.group ? `&group=${enc(view.group)}` : "";
        const page = await get(`${base}/jobs?state=${view.state}&n=${view.size}&offset=${view.offset}${group}`);
        if (page.state === view.state && !view.stopped) paintJobs(page);
      } catch (err) {
        fill(jobs, h("div", { class: "empty" }, `Cannot list jobs: ${err.message}`));
      }
    }

    function pushEvent(ev) {
      if (events.firstChild && events.firstChild.classList.contains("none")) fill(events);
      const t = new Date().toTimeString().slice(0, 8);
      const extra = Object.entries(ev)
        .filter(([k]) => !["event", "job", "queue"].includes(k))
        .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
        .join(" ");
      events.prepend(h("li", {}, h("time", {}, t), h("span", { class: "ev" }, ev.event),
        ev.job ? h("a", { href: jlink(name, ev.job), class: "mono" }, ev.job) : null,
        extra ? h("span", { class: "sub" }, extra) : null));
      while (events.children.length > 40) events.lastChild.remove();
    }

    async function refresh() {
      try {
        const s = await get(base);
        if (view.stopped) return;
        problem.clear();
        view.summary = s;
        paintHead(s);
        if (s.exists === false) return;
        const [m, rp, wk, au] = await Promise.all([get(`${base}/metrics?minutes=60`), get(`${base}/repeats`),
          get(`${base}/workers`), get(`${base}/audit?n=50`)]);
        if (view.stopped) return;
        totals.textContent = `· ${fmt(m.completed.total)} completed, ${fmt(m.failed.total)} dead-lettered in all`;
        await loadHistory();
        paintRepeats(rp.repeats);
        paintWorkers(wk.workers, s.now_ms);
        paintAudit(au.entries);
      } catch (err) {
        if (!view.stopped) problem.show(err);
        return;
      }
      await Promise.all([loadGroups(), searching() ? Promise.resolve() : loadJobs()]);
    }

    /* The history series of the chosen range (the server shares one read per range
     * for a few seconds); drawn as plain SVG, every text a text node. */
    async function loadHistory() {
      const range = view.range;
      const got = await get(`${base}/history?range=${enc(range)}`);
      if (view.stopped || range !== view.range) return;
      view.history = got;
      charts.replaceChildren(...historyCharts(got));
    }

    const onResize = () => {};
    window.addEventListener("resize", onResize);
    refresh().then(() => { if (searching()) loadJobs(); });
    const live = liveView(`${base}/events`, refresh, pushEvent);
    return {
      stop() {
        view.stopped = true;
        window.removeEventListener("resize", onResize);
        live.stop();
      },
    };
  }

  function progressCell(value) {
    if (value === undefined || value === null || value === "") return "";
    const n = Number(value);
    if (Number.isFinite(n) && n >= 0 && n <= 100) {
      const bar = h("div");
      bar.style.width = `${n}%`;
      return h("div", { class: "progress", title: `${n}%` }, bar);
    }
    return h("span", { class: "mono" }, String(value));
  }

  // -------------------------------------------------------------------- chart
  /* The SVG namespace, as the HTML parser assigns it to an <svg> element (the page
   * spells no URL: it fetches nothing from elsewhere, and a test holds it to that). */
  const SVG = (() => {
    const t = document.createElement("template");
    t.innerHTML = "<svg></svg>";
    return t.content.firstChild.namespaceURI;
  })();
  /* An SVG element: attributes set as they are, children appended (text as text). */
  function s(tag, attrs, ...children) {
    const el = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs || {})) el.setAttribute(key, String(value));
    return add(el, children);
  }
  /* A duration in ms as a person reads it: 250ms, 1.5s, 2m 30s, 1h 5m, 2d 3h. */
  function durText(ms) {
    if (ms === null || ms === undefined) return "–";
    if (ms < 1000) return `${Math.round(ms)}ms`;
    if (ms < 60000) return `${+(ms / 1000).toFixed(1)}s`;
    const units = [["d", 86400000], ["h", 3600000], ["m", 60000], ["s", 1000]];
    const parts = [];
    let left = Math.round(ms);
    for (const [u, n] of units) {
      const k = Math.floor(left / n);
      left -= k * n;
      if (k) parts.push(`${k}${u}`);
    }
    return parts.slice(0, 2).join(" ");
  }
  /* A point's start as UTC text. */
  const pointTime = (hist, i) => new Date((hist.first_minute + i * hist.step) * 60000)
    .toISOString().slice(0, 16).replace("T", " ") + " UTC";
  /* Three charts of a history reply: jobs ended (stacked bars), mean wait, mean run. */
  function historyCharts(hist) {
    const n = hist.completed.length;
    const ended = hist.completed.map((c, i) => c + hist.dead[i]);
    const sum = (xs) => xs.reduce((a, b) => a + b, 0);
    const all = sum(ended);
    const per = hist.step === 1 ? "minute" : hist.step === 60 ? "hour" : `${hist.step} minutes`;
    const meanOf = (xs) => (all ? sum(xs) / all : null);
    return [
      chartBox(`Jobs ended per ${per}`, `${fmt(sum(hist.completed))} completed, ${fmt(sum(hist.dead))} dead-lettered`,
        barChart(hist, ended), "history-throughput"),
      chartBox("Mean wait", `enqueue to first start · ${durText(meanOf(hist.wait_ms))} over the range`,
        lineChart(hist, hist.mean_wait_ms), "history-wait"),
      chartBox("Mean run", `last start to end · ${durText(meanOf(hist.run_ms))} over the range`,
        lineChart(hist, hist.mean_run_ms), "history-run"),
    ].concat(n && !all ? [h("p", { class: "sub" }, "No job ended in this range.")] : [],
      lanesTable(hist.lanes));
  }
  /* The busiest lanes of a history reply (whole hours: the lanes are kept per hour);
   * a lane's name is job text, shown as text. */
  function lanesTable(busy) {
    if (!busy) return [];
    const since = new Date(busy.first_hour * 3600000).toISOString().slice(0, 16).replace("T", " ");
    const title = h("figcaption", {}, h("b", {}, "Busiest lanes"), " ",
      h("span", { class: "sub" }, `by jobs ended, whole hours from ${since} UTC · ${fmt(busy.lanes_seen)} lanes seen`));
    if (!busy.lanes.length) {
      return [h("figure", { class: "lanes-box", id: "history-lanes" }, title,
        h("p", { class: "sub" }, "No grouped job ended in this range."))];
    }
    const head = h("tr", {}, ...["lane", "completed", "dead", "mean wait", "mean run"].map((t) => h("th", {}, t)));
    const rows = busy.lanes.map((l) => h("tr", {},
      h("td", { class: "mono" }, l.lane), h("td", {}, fmt(l.completed)), h("td", {}, fmt(l.dead)),
      h("td", {}, durText(l.mean_wait_ms)), h("td", {}, durText(l.mean_run_ms))));
    return [h("figure", { class: "lanes-box", id: "history-lanes" }, title,
      h("table", {}, h("thead", {}, head), h("tbody", {}, rows)))];
  }
  function chartBox(title, sub, svg, id) {
    return h("figure", { class: "chart-box", id }, h("figcaption", {}, h("b", {}, title), " ",
      h("span", { class: "sub" }, sub)), svg);
  }
  const W = 600, H = 130, PL = 48, PR = 8, PT = 8, PB = 20;
  function frame(hist, top, label) {
    const g = s("g", {});
    for (let i = 0; i <= 2; i += 1) {
      const v = (top * i) / 2;
      const yy = PT + (H - PT - PB) * (1 - i / 2);
      g.append(s("line", { x1: PL, x2: W - PR, y1: yy, y2: yy, class: i ? "grid" : "axis" }),
        s("text", { x: PL - 6, y: yy + 4, "text-anchor": "end", class: "tick" }, label(v)));
    }
    const n = hist.completed.length;
    /* a tick every 15 minutes (1 h), 6 hours (24 h) or day (7 d), counted back from now */
    const every = hist.step === 1 ? 15 : hist.step === 15 ? 360 : 1440;
    for (let back = 0; back < n * hist.step; back += every) {
      const i = n - 1 - Math.round(back / hist.step);
      const text = back === 0 ? "now" : back % 1440 === 0 ? `-${back / 1440}d`
        : back % 60 === 0 ? `-${back / 60}h` : `-${back}m`;
      const x = PL + ((i + 0.5) * (W - PL - PR)) / n;
      g.append(s("text", { x, y: H - 5, "text-anchor": "middle", class: "tick" }, text));
    }
    return g;
  }
  function barChart(hist, ended) {
    const n = ended.length;
    const top = niceCeil(Math.max(1, ...ended));
    const plotH = H - PT - PB;
    const slot = (W - PL - PR) / n;
    const barW = Math.max(1, slot * 0.72);
    const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img",
      "aria-label": "jobs ended per point" }, frame(hist, top, fmtShort));
    for (let i = 0; i < n; i += 1) {
      if (!ended[i]) continue;
      const x = PL + i * slot + (slot - barW) / 2;
      const hc = (hist.completed[i] / top) * plotH;
      const hd = (hist.dead[i] / top) * plotH;
      const tip = `${pointTime(hist, i)} · ${fmt(hist.completed[i])} completed, ${fmt(hist.dead[i])} dead-lettered`;
      const bar = s("g", { class: "bar" }, s("title", {}, tip));
      if (hc) bar.append(s("rect", { x, y: PT + plotH - hc, width: barW, height: hc, class: "c" }));
      if (hd) bar.append(s("rect", { x, y: PT + plotH - hc - hd, width: barW, height: hd, class: "f" }));
      svg.append(bar);
    }
    return svg;
  }
  function lineChart(hist, means) {
    const n = means.length;
    const top = niceCeil(Math.max(1, ...means.map((v) => v || 0)));
    const plotH = H - PT - PB;
    const slot = (W - PL - PR) / n;
    const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img",
      "aria-label": "mean per point" }, frame(hist, top, (v) => durText(v)));
    let path = "";
    for (let i = 0; i < n; i += 1) {
      const v = means[i];
      if (v === null || v === undefined) continue;
      const x = PL + (i + 0.5) * slot;
      const y = PT + plotH - (v / top) * plotH;
      path += `${path && means[i - 1] !== null && means[i - 1] !== undefined ? "L" : "M"}${x.toFixed(1)},${y.toFixed(1)}`;
      svg.append(s("circle", { cx: x.toFixed(1), cy: y.toFixed(1), r: 2, class: "dot" },
        s("title", {}, `${pointTime(hist, i)} · ${durText(v)}`)));
    }
    if (path) svg.insertBefore(s("path", { d: path, class: "line" }), svg.children[1] || null);
    return svg;
  }

  function niceCeil(v) {
    const p = 10 ** Math.floor(Math.log10(v));
    for (const f of [1, 2, 2.5, 5, 10]) if (f * p >= v) return Math.max(4, f * p);
    return 10 * p;
  }
  function fmtShort(v) {
    if (v >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
    if (v >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
    return `${+v.toFixed(1)}`;
  }

  // ------------------------------------------------------------------ job view
  function jobView(root, name, id) {
    crumbs({ text: "Queues", href: "#/" }, { text: name, href: qlink(name) }, { text: id });
    const base = `${qpath(name)}/jobs/${enc(id)}`;
    const view = { stopped: false, dirty: false, row: null, gone: false };

    const badges = h("span", { class: "badges" });
    const actions = h("div", { class: "actions" });
    const details = h("dl", { class: "kv" });
    const errorBox = h("div");
    const editor = h("textarea", { id: "payload", spellcheck: "false", "aria-label": "payload (JSON)" });
    const editorMsg = h("span", { class: "sub" });
    const logs = h("ol", { class: "logs" });
    const logLine = h("input", { type: "text", id: "log-line", placeholder: "a log line", disabled: !mayAct() });
    const progressInput = h("input", { type: "text", id: "progress-value", placeholder: "e.g. 50", disabled: !mayAct() });
    const body = h("div");
    const history = h("section", { class: "panel", id: "job-history", hidden: true });
    /* A flow job's parent chain and children, as a tree with states (read with the job). */
    const flowPanel = h("section", { class: "panel", id: "job-flow", hidden: true });
    const problem = problemBanner();

    root.append(
      h("div", { class: "head" }, h("h1", { class: "mono" }, id), badges, actions),
      problem.el,
      body);

    body.append(h("div", { class: "grid2" },
      h("section", { class: "panel" },
        h("h2", {}, "Payload"),
        editor,
        h("div", { class: "inline" },
          verb("Save payload", savePayload, "", { id: "btn-save" }),
          h("button", { type: "button", class: "ghost", onclick: revert }, "Revert"),
          editorMsg)),
      h("section", { class: "panel" }, h("h2", {}, "Details"), details,
        h("div", { class: "inline" }, progressInput, verb("Set progress", setProgress, "ghost", { id: "btn-progress" })))),
    h("div", { class: "gap" }),
    errorBox,
    flowPanel,
    history,
    h("section", { class: "panel" }, h("h2", {}, "Logs"), logs,
      h("form", { class: "inline", onsubmit: (ev) => { ev.preventDefault(); appendLog(); } },
        logLine, verb("Append", null, "ghost", { type: "submit", id: "btn-log" }))));

    editor.addEventListener("input", () => {
      view.dirty = true;
      try {
        JSON.parse(editor.value);
        editor.classList.remove("invalid");
        editorMsg.textContent = "edited, not saved";
      } catch (err) {
        editor.classList.add("invalid");
        editorMsg.textContent = `not JSON: ${err.message}`;
      }
    });

    function revert() {
      view.dirty = false;
      editor.classList.remove("invalid");
      editorMsg.textContent = "";
      if (view.row) editor.value = JSON.stringify(view.row.data, null, 2);
    }

    async function savePayload() {
      let data;
      try {
        data = JSON.parse(editor.value);
      } catch (err) {
        toast("error", "Payload is not JSON", err.message, "json");
        return;
      }
      const ok = await act("Save payload", () => post(`${base}/data`, { data }), "Payload saved");
      if (ok) { view.dirty = false; editorMsg.textContent = "saved"; refresh(); }
    }

    async function setProgress() {
      const text = progressInput.value.trim();
      if (!text) return;
      let value = text;
      try { value = JSON.parse(text); } catch (_) { value = text; }
      const ok = await act("Set progress", () => post(`${base}/progress`, { progress: value }), "Progress set");
      if (ok) { progressInput.value = ""; refresh(); }
    }

    async function appendLog() {
      if (!logLine.value) return;
      const ok = await act("Append log", () => post(`${base}/log`, { line: logLine.value }), false);
      if (ok) { logLine.value = ""; refresh(); }
    }

    async function reprocess() {
      const ok = await act("Reprocess", () => post(`${base}/reprocess`), `Job ${id} back in pending`);
      if (ok) refresh();
    }

    async function rerun() {
      const go = await modal({
        title: `Run ${id} again as a new job?`, ok: "Rerun",
        body: [h("p", {}, "Enqueues a copy with a new id: the same payload, name, group, priority, ",
          "max attempts, backoff and history setting (not the dedup id), at the back of its priority. ",
          "This job stays as it is, linked to the copy.")],
      });
      if (!go) return;
      const reply = await act("Rerun", () => post(`${base}/rerun`), false);
      if (reply) toast("ok", `Job ${id} rerun as ${reply.copy}`);
      refresh();
    }

    async function cancelJob() {
      const go = await modal({
        title: `Cancel running job ${id}?`, ok: "Cancel the job", danger: true,
        body: [h("p", {}, "Asks the worker holding it to stop it, on its next beat (about a second). ",
          "A handler that stops sends the job to dead (\"cancelled by an operator\"); one that ",
          "finishes anyway completes it.")],
      });
      if (!go) return;
      const reply = await act("Cancel", () => post(`${base}/cancel`), false);
      if (reply) toast("ok", reply.requested ? `Asked the worker to cancel ${id}` : `Cancel of ${id} already asked`);
      refresh();
    }

    // --- a flow parent waiting for its children (journaled verbs, like the others)
    async function releaseParent() {
      const go = await modal({
        title: `Release parent ${id} now?`, ok: "Release",
        body: [h("p", {}, "The parent runs now, before its children are done. Its children keep ",
          "running; their results are recorded on it as they come.")],
      });
      if (!go) return;
      const reply = await act("Release", () => post(`${base}/release_parent`), false);
      if (reply) toast("ok", `Parent ${id} released`, `${fmt(reply.unresolved)} children not done yet`);
      refresh();
    }

    async function failParent() {
      const error = h("input", { type: "text", id: "fail-error", value: "failed by an operator" });
      const go = await modal({
        title: `Fail parent ${id}?`, ok: "Fail the parent", danger: true,
        body: [h("p", {}, "The parent goes dead with this error; its own parent (if any) resolves it ",
          "by its policy. Its children keep running (Cancel flow stops them)."),
        h("label", { class: "field" }, h("span", {}, "Error"), error)],
      });
      if (!go) return;
      const ok = await act("Fail parent", () => post(`${base}/fail_parent`, { error: error.value }),
        `Parent ${id} failed`);
      if (ok) refresh();
    }

    async function cancelFlow() {
      const go = await modal({
        title: `Cancel the flow under ${id}?`, ok: "Cancel the flow", danger: true,
        body: [h("p", {}, "Children not yet started are removed, running ones are asked to stop ",
          "(as Cancel does), and this parent and every waiting parent under it go dead ",
          "(\"cancelled by an operator\").")],
      });
      if (!go) return;
      const reply = await act("Cancel flow", () => post(`${base}/cancel_flow`), false);
      if (reply) {
        toast("ok", `Flow under ${id} cancelled`, `${fmt(reply.removed)} removed · ` +
          `${fmt(reply.cancelling)} asked to stop · ${fmt(reply.failed)} parents dead`);
      }
      refresh();
    }

    /* One node of the flow tree: a link to its job, its state, what its parent recorded. */
    function flowNode(n, here) {
      const st = n.state || "gone";
      return h("li", { dataset: { ref: n.ref, state: st } },
        h("span", { class: `flow-node${n.ref === here ? " here" : ""}` },
          h("a", { href: jlink(n.queue, n.id), class: "mono" }, n.queue === name ? n.id : n.ref), " ",
          h("span", { class: `badge ${st}` }, st),
          n.outcome ? h("span", { class: "sub" }, ` → ${n.outcome}`) : null,
          n.policy && n.policy !== "fail_parent" ? h("span", { class: "sub" }, ` · on_fail ${n.policy}`) : null,
          n.unresolved ? h("span", { class: "sub" }, ` · waiting for ${fmt(n.unresolved)}`) : null,
          n.more ? h("span", { class: "sub" }, ` · ${fmt(n.more)} more not shown`) : null,
          n.summary ? h("span", { class: "flow-summary" }, " ", n.summary) : null),
        n.kids && n.kids.length ? h("ul", {}, n.kids.map((k) => flowNode(k, here))) : null);
    }

    async function paintFlow(row) {
      if (row.parent === undefined && row.children === undefined) {
        flowPanel.hidden = true;
        return;
      }
      let d;
      try {
        d = await get(`${base}/flow`);
      } catch (_) {
        return; // the job's own read reports the problem
      }
      if (view.stopped || !d.flow) return;
      const tree = d.flow;
      fill(flowPanel, h("h2", {}, `Flow (${fmt(tree.nodes)} jobs${tree.truncated ? ", truncated" : ""})`),
        h("ul", { class: "flow-tree", id: "flow-tree" }, flowNode(tree.root, tree.job)));
      flowPanel.hidden = false;
    }

    async function runNow() {
      const ok = await act("Run now", () => post(`${base}/promote`), `Job ${id} moved to pending`);
      if (ok) refresh();
    }

    async function remove() {
      const go = await modal({
        title: `Remove ${id}?`, ok: "Remove", danger: true,
        body: [h("p", {}, "Deletes the job in whatever state it is in, with its logs. ",
          "A job a worker holds is refused.")],
      });
      if (!go) return;
      const ok = await act("Remove", () => post(`${base}/remove`), `Job ${id} removed`);
      if (ok) location.hash = qlink(name);
    }

    function paint(d) {
      const row = d.job;
      view.row = row;
      const state = row.state || "unknown";
      const cancelling = state === "active" && row.cancel !== undefined && row.cancel === row.attempts;
      fill(badges, h("span", { class: `badge ${state}`, id: "job-state", dataset: { state } }, state),
        d.locked ? h("span", { class: "badge locked" }, "locked") : null,
        cancelling ? h("span", { class: "badge locked", id: "job-cancelling" }, "cancel asked") : null);
      // reprocess is offered to a dead job only (the server refuses any other)
      fill(actions,
        state === "dead" ? verb("Reprocess", reprocess, "", { id: "btn-reprocess" }) : null,
        // a finished job (completed or dead) can be run again as a new job, a copy
        state === "dead" || state === "completed" ? verb("Rerun as new…", rerun, "ghost", {
          id: "btn-rerun", title: "enqueue a copy of this job with a new id" }) : null,
        state === "scheduled" ? verb("Run now", runNow, "", { id: "btn-run-now",
          title: "move it to pending now, at its priority" }) : null,
        state === "active" ? verb("Cancel…", cancelJob, "danger", { id: "btn-cancel",
          title: "ask the worker running it to stop it" }) : null,
        // a flow parent waiting for its children
        state === "waiting_children" ? verb("Release…", releaseParent, "", { id: "btn-release-parent",
          title: "run it now, before its children are done" }) : null,
        state === "waiting_children" ? verb("Fail…", failParent, "danger", { id: "btn-fail-parent",
          title: "end it as dead now" }) : null,
        state === "waiting_children" ? verb("Cancel flow…", cancelFlow, "danger", { id: "btn-cancel-flow",
          title: "remove its children not yet started, stop the running ones, end it" }) : null,
        // a running job is its worker's: the server refuses to remove it (locked)
        state === "active" ? null : verb("Remove…", remove, "danger", { id: "btn-remove" }));
      const timeLabel = { active: "lease ends", scheduled: "due", dead: "died" }[state];
      const when = (ms) => (ms === undefined || ms === null || ms === "" ? undefined
        : `${relTime(Number(ms), d.now_ms)} · ${isoTime(Number(ms))}`);
      const item = (k, v, attrs) => [h("dt", {}, k), h("dd", attrs || {}, v === undefined || v === "" ? "—" : v)];
      fill(details,
        ...item("state", state),
        ...item("name", row.name),
        ...item("group", row.group),
        ...item("priority", row.priority || "0"),
        ...item("attempts", row.attempts || "0", { id: "job-attempts", title: "claims so far (the fencing token)" }),
        ...item("failures", `${row.failures || "0"}${row.max_attempts ? ` of ${row.max_attempts}` : ""}`),
        ...item("stalled", row.stalled || "0"),
        ...item("progress", row.progress === undefined ? "—" : h("span", {}, progressCell(row.progress), " ", row.progress)),
        ...(timeLabel ? item(timeLabel, d.score === null ? "—" : `${relTime(d.score, d.now_ms)} · ${isoTime(d.score)}`) : []),
        ...(row.dedup ? item("dedup id", row.dedup) : []),
        ...(row.dedup ? item("dedup mode", row.dedup_mode || "simple", { id: "job-dedup-mode" }) : []),
        ...(row.dedup ? item("dedup owner", d.dedup_owner === null || d.dedup_owner === undefined
          ? "free" : (d.dedup_owner === row.id ? "this job" : d.dedup_owner), { id: "job-dedup-owner" }) : []),
        ...(row.dedup_behind ? item("waits behind", row.dedup_behind, { id: "job-dedup-behind" }) : []),
        // the links rerun_job leaves: the newest copy of this job, the job this one copies
        ...(row.rerun_as ? item("rerun as", h("a", { href: jlink(name, row.rerun_as), class: "mono" },
          row.rerun_as), { id: "job-rerun-as" }) : []),
        ...(row.rerun_of ? item("rerun of", h("a", { href: jlink(name, row.rerun_of), class: "mono" },
          row.rerun_of), { id: "job-rerun-of" }) : []),
        // a flow child's parent ('queue:id') and policy; a parent's children
        ...(row.parent ? item("parent", h("a", { href: jlink(row.parent.split(":")[0],
          row.parent.split(":").slice(1).join(":")), class: "mono" }, row.parent), { id: "job-parent" }) : []),
        ...(row.parent ? item("on fail", row.on_fail || "fail_parent") : []),
        ...(row.children ? item("children", row.children, { id: "job-children" }) : []),
        // the timeline of a job kept as history (server clock)
        ...(row.enqueued_at ? item("enqueued", when(row.enqueued_at), { id: "job-enqueued" }) : []),
        ...(row.started_at ? item("first start", when(row.started_at)) : []),
        ...(row.last_started_at && row.last_started_at !== row.started_at ? item("last start", when(row.last_started_at)) : []),
        ...(row.finished_at ? item("finished", when(row.finished_at), { id: "job-finished" }) : []),
        ...(row.died_at && state !== "dead" ? item("died", when(row.died_at)) : []),
      );
      fill(history,
        d.result !== null && d.result !== undefined ? [h("h2", {}, "Result"),
          h("pre", { class: "result", id: "job-result" }, JSON.stringify(d.result, null, 2))] : null,
        d.errors && d.errors.length ? [h("h2", {}, `Error history (${d.errors.length})`),
          h("table", { id: "job-errors" }, h("thead", {}, h("tr", {}, ["Attempt", "Time", "Error"].map((t) => h("th", {}, t)))),
            h("tbody", {}, d.errors.map((e) => h("tr", {},
              h("td", { class: "num" }, String(e.attempt)),
              h("td", { class: "mono", title: isoTime(e.time_ms) }, e.time_ms ? `${relTime(e.time_ms, d.now_ms)}` : "—"),
              h("td", { class: "err" }, e.error)))))] : null);
      history.hidden = !history.firstChild;
      // the full width of the page, collapsible (its first line stays in sight)
      const firstLine = (row.last_error || "").split("\n").filter(Boolean).pop() || "";
      fill(errorBox, row.last_error ? h("details", { class: "error-box", id: "last-error",
        open: view.errorOpen !== false, ontoggle: (ev) => { view.errorOpen = ev.target.open; } },
      h("summary", {}, h("b", {}, "Last error "), h("span", { class: "first-line" }, firstLine)),
      h("pre", {}, row.last_error)) : "");
      if (!view.dirty) editor.value = JSON.stringify(row.data, null, 2);
      fill(logs, ...(d.log_count > d.logs.length
        ? [h("li", { class: "none", id: "logs-more" }, `${fmt(d.log_count - d.logs.length)} older line(s) not shown (the newest ${fmt(d.logs.length)} are).`)]
        : []),
      ...(d.logs.length ? d.logs.map((l, i) => logItem(l, (d.log_times || [])[i], d.now_ms))
        : [h("li", { class: "none" }, "No log lines.")]));
      logs.scrollTop = logs.scrollHeight;
    }

    /* One log line: its server time (UTC, ms) when it has one, then the line as text. */
    function logItem(line, ms, now) {
      const stamp = ms === null || ms === undefined ? null
        : h("time", { class: "log-time", datetime: isoTime(ms), title: relTime(ms, now) }, isoTime(ms));
      return h("li", {}, stamp, line);
    }

    async function refresh() {
      if (view.gone) return;
      try {
        const d = await get(base);
        problem.clear();
        if (!view.stopped) {
          paint(d);
          await paintFlow(d.job);
        }
      } catch (err) {
        if (err.status === 404 && err.reason === "gone") {
          view.gone = true;
          fill(badges, h("span", { class: "badge" }, "gone"));
          fill(actions);
          fill(body, h("div", { class: "panel empty", id: "job-gone" },
            "This job no longer exists: it completed or was removed. ",
            h("a", { href: qlink(name) }, `Back to ${name}`)));
        } else if (!view.stopped) {
          problem.show(err);
        }
      }
    }

    refresh();
    const live = liveView(`${qpath(name)}/events`, refresh, null);
    return { stop() { view.stopped = true; live.stop(); } };
  }

  // ------------------------------------------------------------------- router
  async function route() {
    // a toast about one queue does not follow the operator onto another queue's page
    const shown = hashQueue(location.hash);
    for (const t of document.querySelectorAll("#toasts .toast")) {
      if (shown && t.dataset.queue && t.dataset.queue !== shown) t.remove();
    }
    let hash = location.hash.replace(/^#/, "");
    if (hash.startsWith("token=")) {
      // a token handed over in the fragment: logged in with, then dropped from the URL
      const token = decodeURIComponent(hash.slice(6));
      history.replaceState(null, "", "#/");
      hash = "/";
      try { await sendLogin(token); } catch (err) { showError("Log in", err); }
    }
    if (config.token_required && !config.authenticated && !(await login())) {
      if (current) current.stop();
      current = null;
      fill($("#view"), h("div", { class: "panel empty", id: "need-token" },
        "This console needs its token. ", h("button", { type: "button", class: "ghost small",
          onclick: () => route() }, "Log in")));
      return;
    }
    const [path, query] = hash.split("?");
    const params = new URLSearchParams(query || "");
    const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    if (current) current.stop();
    const root = $("#view");
    fill(root);
    window.scrollTo(0, 0);
    if (parts[0] === "q" && parts.length === 2) current = queueView(root, parts[1], params);
    else if (parts[0] === "q" && parts[2] === "job" && parts.length === 4) current = jobView(root, parts[1], parts[3]);
    else current = queuesView(root);
  }

  /* The top bar's "go to job": the console finds the queue holding the id. */
  async function gotoJob(ev) {
    ev.preventDefault();
    const input = $("#goto-id");
    const jid = input.value.trim();
    if (!/^JOB[0-9A-Za-z]{11}$/.test(jid)) {
      toast("error", "Go to job", "a job id is JOB and 11 letters or digits", "job_id");
      return;
    }
    try {
      const found = await get(`/api/jobs/${enc(jid)}`);
      input.value = "";
      location.hash = jlink(found.queue, found.id);
    } catch (err) {
      showError(`Go to ${jid}`, err);
    }
  }

  async function start() {
    $("#goto-form").addEventListener("submit", gotoJob);
    $("#token-btn").addEventListener("click", async () => {
      if (config.authenticated && config.token_required) {
        await api("POST", "/api/logout", {});
        config.authenticated = false;
        paintChrome();
      }
      route();
    });
    try {
      Object.assign(config, await get("/api/config"));
      if (Array.isArray(config.states) && config.states.length) TABS = config.states;
    if (Array.isArray(config.states) && config.states.length) TABS = config.states;
    } catch (err) {
      toast("error", "Cannot reach the console API", err.message);
    }
    paintChrome();
    window.addEventListener("hashchange", route);
    route();
  }

  start();
})();
