// gridcrawl dashboard: a single page over the MCP JSON API. No framework,
// no build step. Every value that comes from a crawl (URLs, titles, texts,
// reasons) is attacker-controlled web content: it only ever enters the page
// as text nodes or through safeHref, never as markup.
import { lineChart } from "./chart.js";

export const STATUSES = ["to-be-loaded", "to-be-parsed", "to-be-indexed", "indexed", "redirected", "failed", "retired", "sitemap"];
const STATUS_COLORS = {
  "to-be-loaded": "#90caf9", "to-be-parsed": "#5c9ce6", "to-be-indexed": "#3f51b5", indexed: "#43a047",
  redirected: "#8e24aa", failed: "#e53935", retired: "#9e9e9e",
  sitemap: "#00897b",
};
const POLL_MS = 2000;

// ---- DOM and formatting helpers -------------------------------------------

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "href") el.setAttribute("href", safeHref(v));
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "value") el.value = v;
    else if (k === "checked") el.checked = !!v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// safeHref lets through links to our own pages and to http(s) URLs only: a
// crawled "javascript:" URL must not become a clickable script.
export function safeHref(u) {
  const s = String(u);
  if (s.startsWith("#") || (s.startsWith("/") && !s.startsWith("//"))) return s;
  try {
    const p = new URL(s);
    if (p.protocol === "http:" || p.protocol === "https:") return p.href;
  } catch { /* not a URL */ }
  return "#";
}

const nf = new Intl.NumberFormat();
export const num = (n) => (n === null || n === undefined ? "–" : nf.format(n));

export function bytes(n) {
  if (n === null || n === undefined) return "–";
  const u = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  let v = Number(n);
  while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return (i === 0 ? v : v.toFixed(v < 10 ? 1 : 0)) + " " + u[i];
}

export function ms(v) {
  if (v === null || v === undefined) return "–";
  v = Number(v);
  if (v < 1000) return Math.round(v) + " ms";
  if (v < 60000) return String(Number((v / 1000).toFixed(v < 10000 ? 2 : 1))) + " s";
  if (v < 3600000) return Math.floor(v / 60000) + " min " + Math.round((v % 60000) / 1000) + " s";
  return Math.floor(v / 3600000) + " h " + Math.round((v % 3600000) / 60000) + " min";
}

// dur formats a duration of milliseconds in its two largest units:
// "2 s", "1 min 30 s", "1 d 12 h", "30 d".
export function dur(v) {
  if (v === null || v === undefined) return "–";
  v = Number(v);
  if (v < 1000) return Math.round(v) + " ms";
  let s = Math.round(v / 1000);
  const parts = [];
  for (const [n, u] of [[86400, "d"], [3600, "h"], [60, "min"], [1, "s"]]) {
    if (s >= n || parts.length) {
      const k = Math.floor(s / n);
      s -= k * n;
      if (k) parts.push(k + " " + u);
      else if (parts.length) break;
    }
    if (parts.length === 2) break;
  }
  return parts.join(" ");
}

export function rel(t) {
  if (!t) return "–";
  const d = new Date(t);
  if (isNaN(d) || d.getFullYear() < 1971) return "–";
  const s = (Date.now() - d.getTime()) / 1000;
  const a = Math.abs(s);
  let txt;
  if (a < 1) return "now";
  if (a < 60) txt = Math.round(a) + " s";
  else if (a < 3600) txt = Math.round(a / 60) + " min";
  else if (a < 86400) txt = (a / 3600).toFixed(1) + " h";
  else txt = Math.round(a / 86400) + " d";
  return s >= 0 ? txt + " ago" : "in " + txt;
}

export function when(t) {
  if (!t) return h("span", { class: "muted" }, "–");
  const d = new Date(t);
  return h("time", { datetime: d.toISOString(), title: d.toLocaleString() }, rel(t));
}

// stamp is a local time to the millisecond: 2026-11-23 17:47:48.105.
function stamp(t) {
  const d = new Date(t);
  const p = (n, w = 2) => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

const badge = (s) => h("span", { class: "badge " + s }, s || "–");

// OUTCOMES names the warnings of a crawl that ran out of work without
// indexing anything (contracts.OutcomeKind): its state badge is then a
// warning, not a green "finished".
const OUTCOMES = { refused: "nothing fetched", nothing_fetched: "nothing fetched", nothing_indexed: "nothing indexed" };

// stateBadge is a crawl's state, or its outcome as a warning badge.
function stateBadge(c) {
  if (!c.outcome) return badge(c.state);
  return h("span", { class: "badge warn", title: c.outcome.summary, dataset: { state: c.state, outcome: c.outcome.kind } },
    c.state + " · " + (OUTCOMES[c.outcome.kind] || c.outcome.kind));
}

// EXCLUDED is the failure reason of a page left out of the index on
// purpose (noindex, index filters): contracts.ReasonExcluded. Such pages
// are counted in the failed status but shown apart, as "excluded".
const EXCLUDED = "excluded from index (noindex or index filter)";
// CANCELLED is the reason of a URL still pending when its crawl was
// cancelled (contracts.ReasonCancelled): failed, but no failure of the URL.
const CANCELLED = "cancelled";
// noFailure: a failed URL's reason that is no failure, shown plainly.
const noFailure = (reason) => reason === EXCLUDED || reason === CANCELLED;
// failedCount is a crawl's failed URLs without the excluded pages and
// without the URLs a cancel left unfetched (cancelled): both are counted in
// the failed status, and neither is a failure of its URL.
const failedCount = (c) => (c.counts.failed || 0) - (c.excluded || 0) - (c.cancelled || 0);

// LIVE are the states of a crawl that still works or will: it can be
// paused, cancelled and changed. A continuous crawl that is up to date is
// live: it fetches again when its next URL is due.
const LIVE = ["running", "paused", "up_to_date"];
const isLive = (c) => LIVE.includes(c.state);
// working: the crawl fetches now or between two rounds (not paused, not ended).
const working = (c) => c.state === "running" || c.state === "up_to_date";

// schedule describes a continuous crawl's recrawl schedule.
function schedule(r) {
  if (!r) return "one-shot";
  if (r.adaptive) return "adaptive, every " + r.adaptive.min + " to " + r.adaptive.max;
  return "every " + r.interval;
}

// nextDue is a next due time, relative: "in 3 min", or "due now" once
// it has passed.
function nextDue(t) {
  if (!t) return h("span", { class: "muted" }, "none scheduled");
  const d = new Date(t);
  const ahead = d.getTime() - Date.now();
  // rel() says "now" within a second either way: a time still ahead is
  // "in 1 s", one passed "due now".
  const txt = ahead <= 0 ? "due now" : ahead < 1000 ? "in 1 s" : rel(t);
  return h("time", { datetime: d.toISOString(), title: d.toLocaleString() }, txt);
}
const rate = (v) => (v === null || v === undefined || !isFinite(v) ? "–" : String(Number(v < 10 ? v.toFixed(2) : v.toFixed(1))));

function toast(msg, bad) {
  const t = document.getElementById("toast");
  t.textContent = msg;
  t.className = "toast" + (bad ? " bad" : "");
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, bad ? 6000 : 3000);
}

// ---- API ------------------------------------------------------------------

export class APIError extends Error {
  constructor(status, body) {
    super((body && body.error) || "HTTP " + status);
    this.status = status;
    this.field = body && body.field;
  }
}

export async function api(method, path, body) {
  const opt = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
  if (body !== undefined) {
    opt.headers["Content-Type"] = "application/json";
    opt.body = JSON.stringify(body);
  }
  const r = await fetch(path, opt);
  if (r.status === 401 && document.body.dataset.login === "token") {
    location.href = "/login";
    throw new APIError(401, { error: "login required" });
  }
  let data = null;
  const ct = r.headers.get("Content-Type") || "";
  if (ct.includes("json")) data = await r.json().catch(() => null);
  if (!r.ok) throw new APIError(r.status, data);
  return data;
}

const enc = encodeURIComponent;
const crawlPath = (id) => "/api/v1/crawls/" + enc(id);
const urlPage = (crawl, u) => "#/url?crawl=" + enc(crawl) + "&url=" + enc(u);

// doneCount is the URLs of a crawl that reached a final status.
const doneCount = (c) => (c.counts.indexed || 0) + (c.counts.redirected || 0) + (c.counts.failed || 0) + (c.counts.sitemap || 0);

// ---- router ---------------------------------------------------------------

let cleanup = [];
function every(fn, period) {
  let stopped = false;
  let timer;
  const loop = async () => {
    if (stopped) return;
    const live = document.getElementById("live");
    try { await fn(); live.classList.add("on"); } catch (e) { live.classList.remove("on"); if (!(e instanceof APIError)) console.error(e); }
    if (!stopped) timer = setTimeout(loop, period);
  };
  loop();
  const stop = () => { stopped = true; clearTimeout(timer); };
  cleanup.push(stop);
  return stop;
}

const routes = [
  [/^#?\/?$/, "crawls", pageCrawls],
  [/^#\/new$/, "new", pageNew],
  [/^#\/crawl\/([^/?]+)(\?.*)?$/, "crawls", pageCrawl],
  [/^#\/frontier$/, "frontier", pageFrontier],
  [/^#\/search(\?.*)?$/, "search", pageSearch],
  [/^#\/url(\?.*)?$/, "url", pageURL],
];

function route() {
  for (const c of cleanup) c();
  cleanup = [];
  const hash = location.hash || "#/";
  const main = document.getElementById("main");
  main.replaceChildren();
  for (const [re, nav, page] of routes) {
    const m = hash.match(re);
    if (!m) continue;
    for (const a of document.querySelectorAll("[data-nav]")) a.classList.toggle("active", a.dataset.nav === nav);
    const params = new URLSearchParams((hash.split("?")[1]) || "");
    page(main, m.slice(1).map((s) => (s && !s.startsWith("?") ? decodeURIComponent(s) : s)), params);
    return;
  }
  main.append(h("div", { class: "card" }, h("h1", {}, "Not found"), h("a", { href: "#/" }, "Back to the crawls")));
}


// ---- crawls ---------------------------------------------------------------

const seen = new Map(); // crawl id → {t, done} of the previous poll, for pages/s

function crawlRate(c) {
  const now = Date.now();
  const done = doneCount(c);
  if (!working(c)) {
    const end = c.finished_at ? new Date(c.finished_at) : new Date();
    const secs = (end - new Date(c.created_at)) / 1000;
    return secs > 0 ? done / secs : null;
  }
  // The status has no rate: it is the change of the done URLs between two
  // polls. Before a second poll (the list just opened) it is the average
  // since the crawl started, not "–".
  const prev = seen.get(c.crawl_id);
  let r = prev && prev.rate !== undefined ? prev.rate : null;
  if (prev && now - prev.t > 500) {
    r = Math.max(done - prev.done, 0) / ((now - prev.t) / 1000); // a round of a continuous crawl takes settled URLs back
    seen.set(c.crawl_id, { t: now, done, rate: r });
  } else if (!prev) {
    const secs = (now - new Date(c.created_at)) / 1000;
    r = secs > 0 ? done / secs : null;
    seen.set(c.crawl_id, { t: now, done, rate: r });
  }
  return r;
}

function pageCrawls(main) {
  const body = h("tbody");
  const count = h("span", { class: "muted" });
  main.append(
    h("div", { class: "head" }, h("h1", {}, "Crawls"), count, h("span", { class: "spacer" }),
      h("a", { class: "btn primary", href: "#/new" }, "New crawl")),
    h("div", { class: "card tablewrap" }, h("table", { id: "crawls" },
      h("thead", {}, h("tr", {}, h("th", {}, "Crawl"), h("th", {}, "State"), h("th", { class: "num" }, "Indexed"),
        h("th", { class: "num hide-md" }, "Redirected"), h("th", { class: "num" }, "Failed"),
        h("th", { class: "num hide-sm hide-md", title: "Fetched and parsed, left out of the index on purpose (noindex, index filters)" }, "Excluded"),
        h("th", { class: "num hide-sm hide-md", title: "Still pending when the crawl was cancelled: not fetched, no failure" }, "Cancelled"),
        h("th", { class: "num hide-sm hide-md", title: "Sitemaps read, and start hosts' missing /sitemap.xml" }, "Sitemaps"),
        h("th", { class: "num" }, "Pending"), h("th", { class: "num hide-sm hide-md" }, "Retired"), h("th", { class: "num" }, "Total"), h("th", { class: "num hide-sm hide-md" }, "Docs"), h("th", { class: "num" }, "Pages/s"),
        h("th", {}, "Started"), h("th", {}, "Finished"))),
      body)));
  every(async () => {
    const list = await api("GET", "/api/v1/crawls");
    const crawls = (list.crawls || []).slice().sort((a, b) => new Date(b.created_at) - new Date(a.created_at));
    count.textContent = crawls.length + (crawls.length === 1 ? " crawl" : " crawls");
    if (!crawls.length) {
      body.replaceChildren(h("tr", {}, h("td", { colspan: 15, class: "empty" }, "No crawl yet. ", h("a", { href: "#/new" }, "Start one."))));
      return;
    }
    body.replaceChildren(...crawls.map((c) => {
      const name = c.profile && c.profile.name;
      const start = c.profile && c.profile.start_urls && c.profile.start_urls[0];
      return h("tr", { dataset: { crawl: c.crawl_id, state: c.state } },
        h("td", { class: "url" }, h("a", { href: "#/crawl/" + enc(c.crawl_id), class: name ? "" : "mono crawl-id" }, name || c.crawl_id),
          h("div", { class: name ? "muted mono crawl-id" : "muted" }, name ? c.crawl_id : start || "")),
        h("td", {}, stateBadge(c)),
        h("td", { class: "num", dataset: { count: "indexed" } }, num(c.counts.indexed || 0)),
        h("td", { class: "num hide-md", dataset: { count: "redirected" } }, num(c.counts.redirected || 0)),
        h("td", { class: "num", dataset: { count: "failed" } }, num(failedCount(c))),
        h("td", { class: "num hide-sm hide-md", dataset: { count: "excluded" } }, num(c.excluded || 0)),
        h("td", { class: "num hide-sm hide-md", dataset: { count: "cancelled" } }, num(c.cancelled || 0)),
        h("td", { class: "num hide-sm hide-md", dataset: { count: "sitemap" } }, num(c.counts.sitemap || 0)),
        h("td", { class: "num", dataset: { count: "pending" } }, num(c.pending)),
        h("td", { class: "num hide-sm hide-md", dataset: { count: "retired" } }, num(c.retired)),
        h("td", { class: "num", dataset: { count: "total" } }, num(c.total)),
        h("td", { class: "num hide-sm hide-md" }, num(c.documents)),
        h("td", { class: "num", dataset: { rate: "" } }, rate(crawlRate(c))),
        h("td", {}, when(c.created_at)),
        h("td", { dataset: { next: c.recrawl ? "1" : undefined } }, c.finished_at ? when(c.finished_at) : c.recrawl && c.state !== "paused" ?
          [h("span", { class: "muted" }, "continuous · next "), nextDue(c.recrawl.next_due)] : h("span", { class: "muted" }, "–")));
    }));
  }, POLL_MS);
}

// ---- new crawl ------------------------------------------------------------

function field(name, label, input, hint, wide) {
  input.id = input.id || "f-" + name.replace(/\./g, "-");
  input.dataset.field = name;
  return h("div", { class: "f" + (wide ? " wide" : ""), dataset: { for: name } },
    h("label", { for: input.id }, label), input, hint ? h("span", { class: "hint" }, hint) : null,
    h("p", { class: "field-error", hidden: true }));
}

function checkField(name, label, hint) {
  const input = h("input", { type: "checkbox", id: "f-" + name.replace(/\./g, "-"), dataset: { field: name } });
  return h("div", { class: "f" }, h("div", { class: "f check" }, input, h("label", { for: input.id }, label)),
    hint ? h("span", { class: "hint" }, hint) : null, h("p", { class: "field-error", hidden: true }));
}

const numInput = (attrs) => h("input", Object.assign({ type: "number", inputmode: "numeric" }, attrs));
const select = (opts, value) => h("select", {}, opts.map(([v, l]) => h("option", { value: v, selected: v === value }, l)));

// showFieldError puts an API error next to the field it names: the closest
// input whose data-field is the field or a prefix of it ("start_urls[2]" →
// start_urls, "budget.overrides[0].domain" → budget.overrides).
function showFieldError(form, err, general) {
  for (const f of form.querySelectorAll(".f.invalid")) f.classList.remove("invalid");
  for (const p of form.querySelectorAll(".field-error")) { p.hidden = true; p.textContent = ""; }
  general.hidden = true;
  if (!err) return;
  let name = err.field || "";
  let target = null;
  while (name && !target) {
    target = form.querySelector(`[data-field="${CSS.escape(name)}"]`);
    if (target) break;
    if (/\[\d+\]$/.test(name)) name = name.replace(/\[\d+\]$/, "");
    else if (name.includes(".")) name = name.slice(0, name.lastIndexOf("."));
    else name = "";
  }
  if (target) {
    const box = target.closest(".f:not(.check)") || target.closest(".f");
    box.classList.add("invalid");
    const p = box.querySelector(".field-error");
    p.textContent = err.message;
    p.hidden = false;
    target.focus();
  } else {
    general.textContent = err.message;
    general.hidden = false;
  }
}

function pageNew(main) {
  const v = (name) => main.querySelector(`[data-field="${name}"]`);
  const general = h("p", { class: "field-error", role: "alert", hidden: true, id: "form-error" });
  const form = h("form", { class: "stack", id: "new-crawl", novalidate: true },
    h("fieldset", {}, h("legend", {}, "What to crawl"), h("div", { class: "fields" },
      field("start_urls", "Start URLs", h("textarea", { rows: 4, placeholder: "https://example.org/", required: true }), "One URL per line.", true),
      field("name", "Name", h("input", { type: "text", placeholder: "optional" })),
      field("max_depth", "Max depth", numInput({ min: 0, max: 100, value: 3 }), "Link hops from a start URL; 0 fetches only the start URLs."),
      field("scope", "Scope", select([["host", "host — the start URLs' hosts"], ["domain", "domain — their registrable domains"], ["any", "any host"]], "host")),
      field("max_pages", "Max pages", numInput({ min: 0, placeholder: "no limit" })),
      field("max_pages_per_host", "Max pages per host", numInput({ min: 0, placeholder: "no limit" })),
      field("priority", "Priority", numInput({ min: 0, max: 9, value: 0 }), "0 to 9; higher goes first."),
      field("collection", "Collections", h("input", { type: "text", placeholder: "news, docs" }), "Comma-separated names for search filters."),
    )),
    h("fieldset", {}, h("legend", {}, "Filters (regular expressions)"), h("div", { class: "fields" },
      field("crawl_must_match", "Crawl must match", h("input", { type: "text", class: "mono" })),
      field("crawl_must_not_match", "Crawl must not match", h("input", { type: "text", class: "mono" })),
      field("index_must_match", "Index must match", h("input", { type: "text", class: "mono" })),
      field("index_must_not_match", "Index must not match", h("input", { type: "text", class: "mono" })),
    )),
    h("fieldset", {}, h("legend", {}, "Sitemaps"), h("div", { class: "fields" },
      field("sitemaps", "Read sitemaps", select([["on", "on"], ["off", "off"]], "on"),
        "The Sitemap: lines of each start host's robots.txt and its /sitemap.xml."),
      field("sitemap_depth", "Sitemap depth", numInput({ min: 0, placeholder: "0" }),
        "Depth of the sitemaps and the URLs they list: 0 makes them start URLs. At most the max depth."),
    )),
    h("fieldset", {}, h("legend", {}, "Politeness"), h("div", { class: "fields" },
      field("politeness.min_delay_ms", "Min delay (ms)", numInput({ min: 0, placeholder: "500" })),
      field("politeness.max_delay_ms", "Max delay (ms)", numInput({ min: 0, placeholder: "10000" })),
      field("politeness.delay_factor", "Delay factor", numInput({ min: 0, step: "any", placeholder: "2" }), "× the last fetch time; 0 turns the adaptive delay off."),
      field("politeness.robots", "robots.txt", select([["obey", "obey"], ["ignore", "ignore"]], "obey")),
      field("user_agent", "User agent", h("input", { type: "text", placeholder: "gridcrawl/1.0 (default)" }), null, true),
    )),
    h("fieldset", {}, h("legend", {}, "Recrawl (continuous crawl)"), h("p", { class: "hint muted" },
      "Leave empty for a one-shot crawl. A continuous crawl never finishes: it is up to date between rounds and fetches each page again when it is due."),
    h("div", { class: "fields" }, recrawlFields(null))),
    h("fieldset", {}, h("legend", {}, "Budget per crawl host group"), h("div", { class: "fields" },
      field("budget.balance_replenish", "Session balance", numInput({ min: 0, placeholder: "3000" })),
      field("budget.total_budget", "Total budget", numInput({ min: 0, placeholder: "no limit" }), "Spent, the group is retired."),
      field("budget.cost_policy", "Cost policy", select([["", "unit (default)"], ["zero", "zero"], ["unit", "unit"], ["wag", "wag"], ["anti-calendar", "anti-calendar"]], "")),
      checkField("budget.pause_at_finish", "Pause at finish", "Pause instead of finishing, so budgets can be raised."),
      checkField("budget.hold_queues", "Hold queues", "Crawl site after site."),
      field("budget.overrides", "Overrides (JSON)", h("textarea", { rows: 2, placeholder: '[{"domain":"example.org","total_budget":100}]' }), null, true),
    )),
    general,
    h("div", { class: "row" }, h("button", { class: "btn primary", type: "submit", id: "submit" }, "Start crawl"),
      h("a", { class: "btn", href: "#/" }, "Cancel")));
  main.append(h("h1", {}, "New crawl"), h("div", { class: "card" }, form));

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const p = {};
    const str = (name) => v(name).value.trim();
    const int = (name) => {
      const s = str(name);
      if (s === "") return undefined;
      const n = Number(s);
      if (!Number.isFinite(n)) throw Object.assign(new Error("must be a number"), { field: name });
      return n;
    };
    try {
      p.start_urls = str("start_urls").split(/\s+/).filter(Boolean);
      for (const k of ["name", "scope", "crawl_must_match", "crawl_must_not_match", "index_must_match", "index_must_not_match", "user_agent"]) {
        if (str(k)) p[k] = str(k);
      }
      if (str("sitemaps") === "off") p.sitemaps = false;
      for (const k of ["max_depth", "max_pages", "max_pages_per_host", "priority", "sitemap_depth"]) {
        const n = int(k);
        if (n !== undefined) p[k] = n;
      }
      const coll = str("collection").split(",").map((s) => s.trim()).filter(Boolean);
      if (coll.length) p.collection = coll;
      const pol = {};
      for (const k of ["min_delay_ms", "max_delay_ms", "delay_factor"]) {
        const n = int("politeness." + k);
        if (n !== undefined) pol[k] = n;
      }
      pol.robots = str("politeness.robots");
      p.politeness = pol;
      const b = {};
      for (const k of ["balance_replenish", "total_budget"]) {
        const n = int("budget." + k);
        if (n !== undefined) b[k] = n;
      }
      if (str("budget.cost_policy")) b.cost_policy = str("budget.cost_policy");
      if (v("budget.pause_at_finish").checked) b.pause_at_finish = true;
      if (v("budget.hold_queues").checked) b.hold_queues = true;
      if (str("budget.overrides")) {
        try { b.overrides = JSON.parse(str("budget.overrides")); } catch {
          throw Object.assign(new Error("not valid JSON"), { field: "budget.overrides" });
        }
      }
      if (Object.keys(b).length) p.budget = b;
      const rc = readRecrawl(form);
      if (rc) p.recrawl = rc;
    } catch (e) {
      showFieldError(form, e, general);
      return;
    }
    const btn = form.querySelector("#submit");
    btn.disabled = true;
    try {
      const r = await api("POST", "/api/v1/crawls", p);
      showFieldError(form, null, general);
      toast("Crawl " + r.crawl_id + " started");
      location.hash = "#/crawl/" + enc(r.crawl_id);
    } catch (e) {
      showFieldError(form, e, general);
    } finally {
      btn.disabled = false;
    }
  });
}

// ---- crawl detail ---------------------------------------------------------

function actions(c, after) {
  const act = async (label, method, path) => {
    try {
      await api(method, path);
      toast(label + ": done");
      after();
    } catch (e) { toast(label + ": " + e.message, true); }
  };
  const id = c.crawl_id;
  const live = isLive(c);
  return h("span", { class: "row" },
    h("button", { class: "btn", id: "pause", disabled: !working(c), onclick: () => act("Pause", "POST", crawlPath(id) + "/pause") }, "Pause"),
    h("button", { class: "btn", id: "resume", disabled: c.state !== "paused", onclick: () => act("Resume", "POST", crawlPath(id) + "/resume") }, "Resume"),
    h("button", { class: "btn danger", id: "cancel", disabled: !live, title: "Its pending URLs fail as cancelled", onclick: (ev) => {
      // Two clicks, no blocking confirm(): the first arms the button.
      const b = ev.currentTarget;
      if (b.dataset.armed) {
        act("Cancel", "DELETE", crawlPath(id));
        return;
      }
      b.dataset.armed = "1";
      b.textContent = "Really cancel?";
      b.classList.add("armed");
      setTimeout(() => { delete b.dataset.armed; b.textContent = "Cancel"; b.classList.remove("armed"); }, 5000);
    } }, "Cancel"),
    // The crawl as one WACZ file, for ReplayWeb.page and Browsertrix: a
    // plain link, so that the browser streams it to disk.
    h("a", { class: "btn", id: "download-wacz", href: crawlPath(id) + "/wacz", download: id + ".wacz",
      title: "The crawl's WARC segments, index and pages as one WACZ file (opens in ReplayWeb.page, imports into Browsertrix)" }, "Download WACZ"));
}

// shownCounts are a crawl's counts as the dashboard shows them: the failed
// status without the excluded pages, which are shown apart.
function shownCounts(c) {
  const out = Object.assign({}, c.counts);
  out.failed = failedCount(c);
  out.excluded = c.excluded || 0;
  out.cancelled = c.cancelled || 0;
  return out;
}

// SHOWN are the statuses the tiles and the bar show, excluded and
// cancelled after failed.
const SHOWN = STATUSES.flatMap((s) => (s === "failed" ? ["failed", "excluded", "cancelled"] : [s]));
const SHOWN_COLORS = Object.assign({ excluded: "#bdbdbd", cancelled: "#757575" }, STATUS_COLORS);

function tiles(c) {
  const counts = shownCounts(c);
  const out = [];
  for (const s of SHOWN) {
    const t = h("div", { class: "tile", dataset: { status: s } }, h("div", { class: "v", dataset: { count: s } }, num(counts[s] || 0)),
      h("div", { class: "k" }, s));
    t.style.borderLeftColor = SHOWN_COLORS[s];
    if (s === "excluded") t.title = "Fetched and parsed, left out of the index on purpose (noindex, index filters): no failure";
    if (s === "cancelled") t.title = "Still pending when the crawl was cancelled: not fetched, no failure";
    if (s === "cancelled" && !counts.cancelled && c.state !== "cancelled") continue;
    out.push(t);
  }
  out.push(h("div", { class: "tile" }, h("div", { class: "v", dataset: { count: "documents" } }, num(c.documents)), h("div", { class: "k" }, "documents")));
  out.push(h("div", { class: "tile" }, h("div", { class: "v", dataset: { count: "total" } }, num(c.total)), h("div", { class: "k" }, "total URLs")));
  return out;
}

function statusBar(c) {
  const bar = h("div", { class: "bar", title: "URLs per status" });
  const total = c.total || 0;
  const counts = shownCounts(c);
  for (const s of SHOWN) {
    const n = counts[s] || 0;
    if (!n || !total) continue;
    const seg = h("span", { title: s + ": " + num(n) });
    seg.style.width = (100 * n / total) + "%";
    seg.style.background = SHOWN_COLORS[s];
    bar.append(seg);
  }
  return bar;
}

function table(cols, rows, empty) {
  if (!rows.length) return h("p", { class: "empty" }, empty || "Nothing yet.");
  return h("div", { class: "tablewrap" }, h("table", {},
    h("thead", {}, h("tr", {}, cols.map(([label, cls]) => h("th", { class: cls || "" }, label)))),
    h("tbody", {}, rows)));
}

function codes(obj) {
  const entries = Object.entries(obj || {}).sort((a, b) => b[1] - a[1]);
  if (!entries.length) return "–";
  return h("span", { class: "codes mono" }, entries.map(([k, n]) => h("span", {}, (k === "0" ? "none" : k) + "×" + num(n))));
}

function pageCrawl(main, [id]) {
  const head = h("div", { class: "head" });
  const tileBox = h("div", { class: "tiles", id: "counts" });
  const barBox = h("div");
  const rateChart = h("div", { class: "chart", id: "chart-rate" });
  const statusChart = h("div", { class: "chart", id: "chart-status" });
  const reasons = h("div", { id: "failure-reasons" });
  const hosts = h("div", { id: "hosts" });
  const mimes = h("div", { id: "mime-types" });
  const statusCodes = h("div", { id: "status-codes" });
  const info = h("div");
  const recrawlBox = h("div");
  const log = crawlLog(id, () => status());
  main.append(head, recrawlBox, tileBox, barBox,
    h("div", { class: "grid2" },
      h("div", { class: "card" }, h("h2", {}, "Pages per second"), rateChart),
      h("div", { class: "card" }, h("h2", {}, "URLs per status over time"), statusChart)),
    h("div", { class: "card", style: null }, h("h2", {}, "Failures by reason"), reasons),
    h("div", { class: "card" }, h("h2", {}, "Hosts"), hosts),
    h("div", { class: "grid2" },
      h("div", { class: "card" }, h("h2", {}, "MIME types"), mimes),
      h("div", { class: "card" }, h("h2", {}, "HTTP status codes"), statusCodes)),
    log.el,
    h("div", { class: "card" }, h("h2", {}, "Profile"), info));
  let lastState = null; // the state of the status drawn last
  let headParts = null, actionBox = null, actionState = null; // the heading, see refresh
  let reportsState = null; // the state the reports were read at
  let reportsAt = 0;
  let stop;
  let side = null; // the timeline and reports in flight: one round at most
  let logKey = null; // the counts and state the crawl log was read at
  let asked = 0; // status requests made
  let drawn = 0; // the newest status request drawn
  // status reads the crawl's status and draws it (head, outcome, tiles,
  // bar, profile) unless a status asked for later was drawn already: the
  // tiles never go back to an older moment than the log drawn with them.
  const status = async () => {
    const seq = ++asked;
    let c;
    try {
      c = await api("GET", crawlPath(id));
    } catch (e) {
      if (e.status === 404) {
        head.replaceChildren(h("h1", {}, "No crawl " + id), h("a", { href: "#/" }, "Back to the crawls"));
        stop();
        return null;
      }
      throw e;
    }
    if (seq < drawn) return c;
    drawn = seq;
    const name = (c.profile && c.profile.name) || c.crawl_id;
    const dur = ((c.finished_at ? new Date(c.finished_at) : new Date()) - new Date(c.created_at));
    // The heading's texts are redrawn on every poll, its buttons only when
    // the state changes and in place: made anew on every poll, a button
    // could be replaced under a click (and an armed Cancel would disarm).
    const parts = [h("h1", {}, name), h("span", { id: "state" }, stateBadge(c)),
      h("span", { class: "muted" }, "started ", when(c.created_at), c.finished_at ? [" · finished ", when(c.finished_at)] : "", " · ", ms(dur))];
    if (!headParts || !head.contains(headParts[0])) {
      actionBox = h("span", { class: "actions" });
      actionState = null;
      head.replaceChildren(...parts, h("span", { class: "spacer" }), actionBox);
    } else {
      headParts.forEach((old, i) => old.replaceWith(parts[i]));
    }
    headParts = parts;
    if (actionState !== c.state) {
      actionBox.replaceChildren(actions(c, refresh));
      actionState = c.state;
    }
    recrawlBox.replaceChildren(c.outcome ? h("div", { class: "card warn", id: "outcome", role: "alert" }, c.outcome.summary) : "",
      c.profile && c.profile.recrawl ? recrawlCard(c) : "");
    tileBox.replaceChildren(...tiles(c));
    barBox.replaceChildren(statusBar(c));
    if (lastState !== c.state || info.childElementCount === 0) {
      info.replaceChildren(profileView(c));
    }
    return c;
  };
  // refresh draws the status as soon as it answers. The log's first page
  // is read after it when the counts or the state changed, and drawn in
  // one go with a status read after the log: with counts that only grow,
  // the tiles then show at least every final URL the log lists. The
  // timeline and the reports follow in the background: a slow report
  // never holds the next poll, and a new round starts only once the last
  // one ended.
  const refresh = async () => {
    let c = await status();
    if (!c) return;
    const key = JSON.stringify([c.state, c.total, shownCounts(c)]);
    if (key !== logKey && log.follows(c.state !== lastState || logKey === null)) {
      const drawLog = await log.read();
      const after = await status();
      if (!after) return;
      c = after;
      drawLog();
      logKey = key;
    }
    lastState = c.state;
    if (!side) side = background(c).catch((e) => console.error(e)).finally(() => { side = null; });
  };
  // background reads the timeline and, every 5 s while the crawl works
  // (30 s else, and at once when its state changed), the reports, all at
  // once.
  const background = async (c) => {
    const timeline = api("GET", crawlPath(id) + "/timeline").catch(() => null)
      .then((tl) => drawTimeline(tl, rateChart, statusChart, (c.excluded || 0) > 0, c));
    if (reportsState !== c.state || working(c) && Date.now() - reportsAt > 5000 || Date.now() - reportsAt > 30000) {
      reportsState = c.state;
      reportsAt = Date.now();
      await Promise.all([
        timeline,
        report(id, "failure-reasons", reasons, (rows) => [table([["Reason"], ["URLs", "num"], ["Sample URLs"]], rows.filter((r) => r.reason !== EXCLUDED).map((r) =>
          h("tr", {}, h("td", { class: "wrap" }, h("a", { href: "#/crawl/" + enc(id) + "?status=failed&reason=" + enc(r.reason), onclick: (ev) => { ev.preventDefault(); log.show({ status: "failed", reason: r.reason }); } }, r.reason || "(no reason)")),
            h("td", { class: "num" }, num(r.count)),
            h("td", { class: "url" }, h("ul", { class: "samples" }, (r.sample_urls || []).map((u) => h("li", {}, h("a", { href: urlPage(id, u) }, u))))))), "No failure."),
          rows.filter((r) => r.reason === EXCLUDED).map((r) => h("p", { class: "muted", id: "excluded-note" }, num(r.count), " page" + (r.count === 1 ? " was" : "s were"),
            " fetched and parsed but left out of the index on purpose (noindex or index filter): no failure. ",
            h("a", { href: "#", onclick: (ev) => { ev.preventDefault(); log.show({ status: "failed", reason: EXCLUDED }); } }, "List them")))]),
        report(id, "hosts", hosts, (rows) => table([["Host"], ["URLs", "num"], ["Fetched", "num"], ["Failed", "num"], ["Bytes", "num"], ["Status codes"]],
          rows.map((r) => h("tr", {}, h("td", { class: "wrap" }, h("a", { href: "#", onclick: (ev) => { ev.preventDefault(); log.show({ host: r.host }); } }, r.host)),
            h("td", { class: "num" }, num(r.urls)), h("td", { class: "num" }, num(r.fetched)),
            h("td", { class: "num" + (r.failed ? " err" : "") }, num(r.failed)), h("td", { class: "num" }, bytes(r.bytes)), h("td", {}, codes(r.status_codes)))))),
        report(id, "mime-types", mimes, (rows) => table([["MIME type"], ["Documents", "num"], ["Bytes", "num"]],
          rows.map((r) => h("tr", {}, h("td", { class: "mono" }, r.mime_type || "(none)"), h("td", { class: "num" }, num(r.count)), h("td", { class: "num" }, bytes(r.bytes)))))),
        report(id, "status-codes", statusCodes, (rows) => table([["Status"], ["URLs", "num"]],
          rows.map((r) => h("tr", {}, h("td", { class: "mono" }, r.status_code === 0 || r.status_code === null ? "no response" : String(r.status_code)), h("td", { class: "num" }, num(r.count)))))),
      ]);
    }
    await timeline;
  };
  stop = every(refresh, POLL_MS);
}

// recrawlCard shows a continuous crawl's schedule: its interval, the URLs
// due now and when the next one is due.
function recrawlCard(c) {
  const r = c.recrawl || {};
  let note;
  switch (c.state) {
    case "up_to_date": note = "Up to date: every page is fetched; nothing to do until the next URL is due."; break;
    case "running": note = "Fetching: the first round, or the URLs that came due."; break;
    case "paused": note = "Paused: due URLs wait until the crawl is resumed."; break;
    default: note = "The crawl has ended: nothing is fetched again.";
  }
  return h("div", { class: "card recrawl", id: "recrawl" },
    h("div", { class: "head" }, h("h2", {}, "Continuous crawl"), h("span", { class: "muted", id: "recrawl-note" }, note)),
    h("div", { class: "tiles" },
      h("div", { class: "tile" }, h("div", { class: "v small", id: "recrawl-schedule" }, schedule(c.profile.recrawl)), h("div", { class: "k" }, "schedule")),
      h("div", { class: "tile" }, h("div", { class: "v", id: "recrawl-due" }, num(r.due || 0)), h("div", { class: "k" }, "URLs due now")),
      h("div", { class: "tile" }, h("div", { class: "v small", id: "recrawl-next" }, isLive(c) ? nextDue(r.next_due) : "–"),
        h("div", { class: "k" }, "next due", r.next_due ? h("span", { class: "mono" }, " · " + stamp(r.next_due)) : null))));
}

async function report(id, name, box, render) {
  try {
    const r = await api("GET", crawlPath(id) + "/reports/" + name);
    box.replaceChildren(...[render(r.rows || [])].flat(Infinity));
  } catch (e) {
    box.replaceChildren(h("p", { class: "muted" }, "Report unavailable: " + e.message));
  }
}

function profileView(c) {
  const p = c.profile || {};
  const pol = p.politeness || {};
  const b = p.budget;
  return h("div", {}, h("dl", { class: "kv" },
    h("dt", {}, "Start URLs"), h("dd", {}, (p.start_urls || []).map((u) => h("div", { class: "url" }, h("a", { href: u, rel: "noreferrer", target: "_blank" }, u)))),
    h("dt", {}, "Depth · scope"), h("dd", {}, String(p.max_depth), " · ", p.scope || "host"),
    h("dt", {}, "Sitemaps"), h("dd", { id: "profile-sitemaps" }, p.sitemaps === false ? "off" : "on, depth " + (p.sitemap_depth || 0)),
    h("dt", {}, "Politeness"), h("dd", {}, ms(pol.min_delay_ms), " – ", ms(pol.max_delay_ms), ", factor ", String(pol.delay_factor), ", robots.txt ", pol.robots),
    h("dt", {}, "Recrawl"), h("dd", {}, schedule(p.recrawl)),
    h("dt", {}, "Budget"), h("dd", {}, b ? [b.total_budget ? "total " + num(b.total_budget) : "no total limit", ", session ", num(b.balance_replenish || 3000), ", cost ", b.cost_policy || "unit"] : "default (no limit)"),
    h("dt", {}, "Version"), h("dd", {}, String(p.version || 0))),
  h("details", {}, h("summary", { class: "muted" }, "JSON"), h("pre", { class: "profile" }, JSON.stringify(p, null, 2))));
}

// shortID is a loader id cut to its last 8 characters (its random part).
const shortID = (id) => (id && id.length > 12 ? "…" + id.slice(-8) : id || "");

// drawTimeline plots the timeline's samples. The samples count records per
// status: their failed includes the excluded pages, which the tiles show
// apart, so the series says so when there are any (excluded). A cancelled
// crawl's URLs that were pending at the cancel are failed in the samples
// after it; they are drawn as cancelled, as the tiles count them: what a
// sample's failed holds beyond the crawl's other failures (c: its status).
function drawTimeline(tl, rateBox, statusBox, excluded, c) {
  let pts = (tl && tl.points) || [];
  const cancelled = (c && c.cancelled) || 0;
  if (cancelled > 0) {
    const others = ((c.counts || {}).failed || 0) - cancelled;
    pts = pts.map((p) => {
      const counts = Object.assign({}, p.counts || {});
      const n = Math.max(0, Math.min(cancelled, (counts.failed || 0) - others));
      if (n > 0) {
        counts.failed -= n;
        counts.cancelled = n;
      }
      return Object.assign({}, p, { counts });
    });
  }
  if (pts.length < 2) {
    const msg = tl ? "Collecting samples…" : "No timeline for this crawl.";
    rateBox.replaceChildren(h("p", { class: "empty" }, msg));
    statusBox.replaceChildren(h("p", { class: "empty" }, msg));
    return;
  }
  const t = (p) => new Date(p.time).getTime();
  // A continuous crawl takes settled URLs back to to-be-loaded when they
  // are due: the timeline's rate (URLs that left to-be-loaded) then drops
  // below zero, which is no rate of fetching; it shows as 0.
  rateBox.replaceChildren(lineChart([{ name: "pages/s", color: "#2962ff", fill: true, points: pts.map((p) => [t(p), Math.max(p.pages_per_second || 0, 0)]) }], { yFormat: rate }));
  const series = [...STATUSES, CANCELLED].filter((s) => pts.some((p) => (p.counts || {})[s]))
    .map((s) => ({ name: s === "failed" && excluded ? "failed + excluded" : s, color: SHOWN_COLORS[s], points: pts.map((p) => [t(p), (p.counts || {})[s] || 0]) }));
  statusBox.replaceChildren(lineChart(series, { yFormat: num }));
}

// crawlLog is the crawl's URL list, filterable by status, reason and host,
// paged by the API's cursor. It loads nothing by itself: the crawl page
// reads its first page between two statuses (read) so that the tiles and
// the log show one moment, and the user's own filters and pages go through
// sync, which draws a fresh status with them for the same reason.
function crawlLog(id, sync) {
  const statusSel = select([["", "any status"], ...STATUSES.map((s) => [s, s])], "");
  const hostIn = h("input", { type: "text", placeholder: "host" });
  const reasonIn = h("input", { type: "text", placeholder: "reason" });
  const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const more = h("button", { class: "btn small", hidden: true }, "Next page");
  const top = h("button", { class: "btn small", hidden: true }, "First page");
  const el = h("div", { class: "card", id: "crawl-log" }, h("div", { class: "head" }, h("h2", {}, "Crawl log"), h("span", { class: "spacer" }),
    h("form", { class: "row", onsubmit: (ev) => { ev.preventDefault(); filter(); } }, statusSel, hostIn, reasonIn, h("button", { class: "btn small", type: "submit" }, "Filter"))),
  body, h("div", { class: "pager" }, top, more));
  // shown is the filter and page the user chose (the inputs may hold
  // values typed since, not yet applied); next is the cursor after it.
  let shown = { status: "", host: "", reason: "", cursor: "" };
  let next = null;
  let loads = 0; // requests made: only the answer to the newest is drawn
  // read reads the page shown and returns the function that draws it,
  // which draws nothing once a newer request was made.
  async function read() {
    const seq = ++loads;
    const want = shown;
    const q = new URLSearchParams({ limit: "50" });
    if (want.status) q.set("status", want.status);
    if (want.host) q.set("host", want.host);
    if (want.reason) q.set("reason", want.reason);
    if (want.cursor) q.set("cursor", want.cursor);
    let r = null;
    let err = null;
    try {
      r = await api("GET", crawlPath(id) + "/urls?" + q);
    } catch (e) {
      err = e;
    }
    return () => {
      if (seq !== loads) return;
      if (err) {
        body.replaceChildren(h("p", { class: "muted" }, "Crawl log unavailable: " + err.message));
        return;
      }
      next = r.next_cursor;
      more.hidden = !next;
      top.hidden = !want.cursor;
      body.replaceChildren(table([["URL"], ["Status"], ["HTTP", "num"], ["Depth", "num"], ["Bytes", "num"], ["Reason"], ["Changed"]],
        (r.urls || []).map((u) => h("tr", { dataset: { status: u.status } }, h("td", { class: "url" }, h("a", { href: urlPage(id, u.url) }, u.url)), h("td", {}, badge(u.status)),
          h("td", { class: "num" }, u.http_status || "–"), h("td", { class: "num" }, num(u.depth)), h("td", { class: "num" }, bytes(u.bytes)),
          h("td", { class: "wrap" + (u.status === "failed" && !noFailure(u.reason) ? " err" : " muted") }, u.reason || ""), h("td", {}, when(u.status_time)))), "No URL matches."));
    };
  }
  // choose shows what the user chose, the filter in the inputs or another
  // page of the filter shown, and draws it with a status read after it.
  async function choose(want) {
    shown = want;
    const draw = await read();
    await sync().catch(() => {});
    draw();
  }
  const filter = () => choose({ status: statusSel.value, host: hostIn.value.trim(), reason: reasonIn.value.trim(), cursor: "" });
  more.addEventListener("click", () => choose(Object.assign({}, shown, { cursor: next })));
  top.addEventListener("click", () => choose(Object.assign({}, shown, { cursor: "" })));
  return {
    el,
    read,
    // follows says whether the log reloads at a new status: its first
    // page when the counts changed, unless the user filtered it or paged;
    // a filtered first page when the crawl's state changed.
    follows: (stateChanged) => !shown.cursor && (stateChanged || !shown.status && !shown.host && !shown.reason),
    show: (f) => {
      statusSel.value = f.status || "";
      hostIn.value = f.host || "";
      reasonIn.value = f.reason || "";
      filter();
      el.scrollIntoView({ behavior: "smooth" });
    },
  };
}

// ---- frontier -------------------------------------------------------------

// Loader reports predate the API's millisecond fields in some versions:
// take *_ms when present, else convert nanoseconds.
const durMS = (g, k) => (g[k + "_ms"] !== undefined ? g[k + "_ms"] : g[k] !== undefined && g[k] !== null ? g[k] / 1e6 : null);
const limit = (v) => (v === null || v === undefined || v < 0 ? "no limit" : num(v));

// crawlUses is a group's spend against its budget, one line per crawl
// using the group: each crawl's budget is its own.
function crawlUses(g, b) {
  const cs = g.crawls || [];
  if (!cs.length) return [num(g.spent), " / ", limit(b.total_budget)];
  return cs.map((c) => h("div", { class: "nowrap", dataset: { crawl: c.crawl_id },
    title: "crawl " + c.crawl_id + ": " + num(c.fetches) + (c.fetches === 1 ? " fetch, " : " fetches, ") + num(c.queued) + " queued" + (c.retired ? ", " + num(c.retired) + " retired" : "") },
    cs.length > 1 ? h("span", { class: "muted" }, c.crawl_id.slice(-8) + " ") : null,
    num(c.spent), " / ", limit(c.budget ? c.budget.total_budget : null), c.budget_spent ? h("span", { class: "muted" }, " spent") : null));
}

// groupState is a group's state as of now: a loader reports a group
// waiting until a time, and the report is read up to an interval later,
// so a waiting group whose time has passed is ready again.
function groupState(g) {
  if (g.state === "waiting" && g.next_eligible && new Date(g.next_eligible).getTime() <= Date.now()) return "ready";
  return g.state;
}

// nextEligible is when a group may be fetched from next, never a time in
// the past: a time that has passed is "now".
function nextEligible(g) {
  if (g.state === "busy") return h("span", { class: "muted" }, "fetching");
  if (!g.next_eligible) return h("span", { class: "muted" }, "–");
  const d = new Date(g.next_eligible);
  if (d.getTime() <= Date.now()) return h("span", { title: "eligible since " + d.toLocaleString() }, "now");
  return when(g.next_eligible);
}

// lastError is a group's last error: red while the group has URLs to
// fetch, grey and marked as earlier once it is idle (its error may be from
// long ago and says nothing of its state now).
// A 4xx answer other than 429 (a 404 of the sitemap probe of /sitemap.xml,
// a page gone) is the site's answer about one URL, no error of the group:
// it is shown plainly, never in red.
function lastError(g) {
  if (!g.last_error) return h("td", { class: "wrap" });
  const answer = /^http status 4(?!29)\d\d$/.test(g.last_error);
  if (answer) return h("td", { class: "wrap muted", dataset: { answer: "1" }, title: "The site's last 4xx answer, about one URL (such as a missing /sitemap.xml): no error of the group" }, "last answer " + g.last_error.replace("http status ", ""));
  if (g.state === "idle" || !g.queued) return h("td", { class: "wrap muted", dataset: { old: "1" } }, "earlier: " + g.last_error);
  return h("td", { class: "wrap err" }, g.last_error);
}

function pageFrontier(main) {
  const totals = h("div", { class: "tiles", id: "frontier-totals" });
  const groups = h("div", { id: "groups" });
  const controls = h("div", { id: "controls" });
  main.append(h("div", { class: "head" }, h("h1", {}, "Frontier"), h("span", { class: "muted", id: "frontier-time" })), totals,
    h("div", { class: "card" }, h("h2", {}, "Crawl controls"), controls),
    h("div", { class: "card" }, h("h2", {}, "Crawl host groups"), groups));
  let selected = "";
  // The form is rendered again only when the crawls or the selected one's
  // profile change; a change of state alone (a continuous crawl goes from
  // running to up_to_date and back at every round) redraws the row of the
  // state and buttons, not the settings being edited.
  let crawlsKey = null; // null: render on the next load
  let statesKey = null;
  const loadControls = async () => {
    const list = await api("GET", "/api/v1/crawls");
    const live = (list.crawls || []).filter(isLive)
      .sort((a, b) => new Date(b.created_at) - new Date(a.created_at));
    if (!live.some((c) => c.crawl_id === selected)) selected = live.length ? live[0].crawl_id : "";
    const c = live.find((x) => x.crawl_id === selected);
    const key = live.map((x) => x.crawl_id).join(",") + "|" + (c ? c.profile.version || 0 : "");
    const states = live.map((x) => x.state).join(",");
    const choose = (id) => { selected = id; crawlsKey = null; loadControls(); };
    const changed = () => { crawlsKey = null; loadControls(); };
    if (key === crawlsKey) {
      if (states !== statesKey) controls.querySelector("#control-head").replaceWith(controlsHead(live, c, choose, changed));
      statesKey = states;
      return;
    }
    crawlsKey = key;
    statesKey = states;
    if (!live.length) {
      controls.replaceChildren(h("p", { class: "empty" }, "No running, paused or up-to-date crawl."));
      return;
    }
    controls.replaceChildren(crawlControls(live, c, choose, changed));
  };
  every(async () => {
    const rep = await api("GET", "/api/v1/frontier");
    const nLoaders = (rep.loaders || []).length;
    document.getElementById("frontier-time").textContent = nLoaders + (nLoaders === 1 ? " loader reporting" : " loaders reporting");
    const t = rep.totals || {};
    totals.replaceChildren(...[["groups", t.groups], ["ready", t.ready], ["waiting", t.waiting], ["busy", t.busy], ["inactive", t.inactive],
      ["retired", t.retired], ["idle", t.idle], ["queued URLs", t.queued], ["retired URLs", t.retired_items],
      ...(t.filed ? [["filed URLs", t.filed]] : [])]
      .map(([k, v]) => h("div", { class: "tile" }, h("div", { class: "v" }, num(v || 0)), h("div", { class: "k" }, k))));
    const rows = [];
    for (const l of rep.loaders || []) {
      const r = l.report || {};
      for (const g of r.groups || []) {
        const b = g.budget || {};
        const st = groupState(g);
        rows.push(h("tr", { dataset: { group: g.chg, state: st } },
          h("td", { class: "wrap" }, h("strong", {}, g.chg), (g.hosts || []).length > 1 || (g.hosts || [])[0] !== g.chg ? h("div", { class: "muted" }, (g.hosts || []).join(", ")) : null),
          h("td", {}, st === g.state ? badge(st) : h("span", { class: "badge " + st, title: "reported " + g.state + " until " + new Date(g.next_eligible).toLocaleString() }, st)),
          h("td", { class: "next" }, nextEligible(g)),
          h("td", { class: "num" }, ms(durMS(g, "delay"))),
          h("td", { class: "muted nowrap", dataset: { version: g.profile_version ?? "" }, title: g.crawl_id ? "decided by profile version " + g.profile_version + " of crawl " + g.crawl_id : "" },
            g.why || "–", g.crawl_id ? " · v" + g.profile_version : ""),
          h("td", { class: "num" }, num(g.queued)),
          h("td", { class: "num" }, num(g.fetches)),
          h("td", { class: "num" }, crawlUses(g, b)),
          h("td", { class: "num hide-sm" }, g.session_balance === null || g.session_balance === undefined ? "–" : num(g.session_balance)),
          h("td", { class: "hide-sm mono nowrap" }, (g.recent_status || []).slice(-5).map((s) => (s === 0 ? "×" : s)).join(" ")),
          lastError(g),
          // One loader needs no column; several are told apart by a short
          // id, the whole one in its title.
          nLoaders > 1 ? h("td", { class: "muted mono hide-sm nowrap", title: l.loader_id }, shortID(l.loader_id)) : null));
      }
    }
    groups.replaceChildren(table([["Group"], ["State"], ["Next eligible"], ["Delay", "num"], ["Set by"], ["Queued", "num"], ["Fetches", "num"],
      ["Spent / budget", "num"], ["Balance", "num"], ["Recent"], ["Last error"], ...(nLoaders > 1 ? [["Loader"]] : [])], rows, "No loader has reported a group yet."));
    await loadControls();
  }, POLL_MS);
}

// controlsHead is the row of the controls with the crawl chooser, the
// chosen crawl's state and its buttons.
function controlsHead(live, c, choose, changed) {
  const sel = select(live.map((x) => [x.crawl_id, (x.profile.name ? x.profile.name + " · " : "") + x.crawl_id + " (" + x.state + ")"]), c.crawl_id);
  sel.id = "control-crawl";
  sel.addEventListener("change", () => choose(sel.value));
  return h("div", { class: "row", id: "control-head" }, h("label", { for: "control-crawl" }, "Crawl"), sel, badge(c.state),
    c.recrawl ? h("span", { class: "muted" }, "next due ", nextDue(c.recrawl.next_due)) : null,
    h("a", { href: "#/crawl/" + enc(c.crawl_id) }, "details"), h("span", { class: "spacer" }), actions(c, changed));
}

// recrawlFields are the inputs of a recrawl schedule: a fixed interval, or
// the bounds of an adaptive one.
function recrawlFields(r) {
  r = r || {};
  const a = r.adaptive || {};
  return [
    field("recrawl.interval", "Recrawl every", h("input", { type: "text", class: "mono", placeholder: "24h", value: r.interval || "" }),
      "Fetch every page again after this long: 90m, 24h, 30d, 1d12h."),
    field("recrawl.adaptive.min", "…or adaptive, from", h("input", { type: "text", class: "mono", placeholder: "1h", value: a.min || "" }),
      "Shortest interval: halved down to it when a page changed."),
    field("recrawl.adaptive.max", "…to", h("input", { type: "text", class: "mono", placeholder: "30d", value: a.max || "" }),
      "Longest interval: doubled up to it when a page did not change."),
  ];
}

// readRecrawl returns the schedule the recrawl fields of form give:
// undefined when all are empty; the API checks the durations.
function readRecrawl(form) {
  const v = (name) => form.querySelector(`[data-field="${name}"]`).value.trim();
  const interval = v("recrawl.interval");
  const lo = v("recrawl.adaptive.min");
  const hi = v("recrawl.adaptive.max");
  if (interval && (lo || hi)) throw Object.assign(new Error("give either an interval or adaptive bounds, not both"), { field: "recrawl.interval" });
  if (interval) return { interval };
  if (lo || hi) return { adaptive: { min: lo, max: hi } };
  return undefined;
}

function crawlControls(live, c, choose, changed) {
  const p = c.profile || {};
  const pol = p.politeness || {};
  const b = p.budget || {};
  const general = h("p", { class: "field-error", hidden: true });
  const form = h("form", { class: "stack", id: "patch-form" },
    h("div", { class: "fields" },
      field("politeness.min_delay_ms", "Min delay (ms)", numInput({ min: 0, value: pol.min_delay_ms })),
      field("politeness.max_delay_ms", "Max delay (ms)", numInput({ min: 0, value: pol.max_delay_ms })),
      field("politeness.delay_factor", "Delay factor", numInput({ min: 0, step: "any", value: pol.delay_factor })),
      field("budget.total_budget", "Total budget per group", numInput({ min: 0, value: b.total_budget || "", placeholder: "no limit" })),
      field("budget.balance_replenish", "Session balance", numInput({ min: 0, value: b.balance_replenish || "", placeholder: "3000" })),
      p.recrawl ? recrawlFields(p.recrawl) : null),
    general,
    h("div", { class: "row" }, h("button", { class: "btn primary", type: "submit" }, "Apply changes"),
      h("span", { class: "muted" }, "Profile version " + (p.version || 0) + ". Raising a budget puts retired URLs back to work.")));
  const val = (name) => form.querySelector(`[data-field="${name}"]`).value.trim();
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const patch = { politeness: {} };
    for (const k of ["min_delay_ms", "max_delay_ms", "delay_factor"]) {
      if (val("politeness." + k) !== "") patch.politeness[k] = Number(val("politeness." + k));
    }
    const nb = Object.assign({}, b); // a budget given replaces the crawl's budget as a whole
    nb.total_budget = val("budget.total_budget") === "" ? 0 : Number(val("budget.total_budget"));
    nb.balance_replenish = val("budget.balance_replenish") === "" ? 0 : Number(val("budget.balance_replenish"));
    patch.budget = nb;
    try {
      if (p.recrawl) {
        const r = readRecrawl(form);
        if (!r) throw Object.assign(new Error("a continuous crawl needs an interval, or adaptive bounds"), { field: "recrawl.interval" });
        if (JSON.stringify(r) !== JSON.stringify(p.recrawl)) patch.recrawl = r;
      }
    } catch (e) {
      showFieldError(form, e, general);
      return;
    }
    try {
      await api("PATCH", crawlPath(c.crawl_id), patch);
      showFieldError(form, null, general);
      toast("Settings of " + c.crawl_id + " changed");
      changed();
    } catch (e) { showFieldError(form, e, general); }
  });
  return h("div", {}, controlsHead(live, c, choose, changed), h("hr", { class: "sep" }), form);
}

// ---- search ---------------------------------------------------------------

async function crawlOptions(sel, current) {
  try {
    const list = await api("GET", "/api/v1/crawls");
    const cs = (list.crawls || []).sort((a, b) => new Date(b.created_at) - new Date(a.created_at));
    sel.replaceChildren(h("option", { value: "" }, sel.dataset.all || "all crawls"),
      ...cs.map((c) => h("option", { value: c.crawl_id, selected: c.crawl_id === current }, (c.profile.name ? c.profile.name + " · " : "") + c.crawl_id)));
    if (current) sel.value = current;
  } catch { /* the list is a convenience */ }
  return sel;
}

function pageSearch(main, _, params) {
  const q = h("input", { type: "search", id: "q", placeholder: "Search the indexed documents", value: params.get("q") || "", autofocus: true });
  q.style.flex = "1";
  const crawlSel = h("select", { id: "search-crawl" });
  const out = h("div", { id: "results" });
  crawlOptions(crawlSel, params.get("crawl") || "");
  main.append(h("h1", {}, "Search"), h("div", { class: "card" },
    h("form", { class: "row", onsubmit: (ev) => {
      ev.preventDefault();
      const n = new URLSearchParams({ q: q.value.trim() });
      if (crawlSel.value) n.set("crawl", crawlSel.value);
      location.hash = "#/search?" + n;
    } }, q, crawlSel, h("button", { class: "btn primary", type: "submit" }, "Search"))), out);
  const query = (params.get("q") || "").trim();
  if (!query) return;
  const offset = Number(params.get("offset") || 0);
  (async () => {
    const s = new URLSearchParams({ q: query, limit: "20", offset: String(offset) });
    if (params.get("crawl")) s.set("crawl", params.get("crawl"));
    try {
      const r = await api("GET", "/api/v1/search?" + s);
      const nav = h("div", { class: "pager" });
      const page = (o) => { const n = new URLSearchParams(params); n.set("offset", String(o)); return "#/search?" + n; };
      if (offset > 0) nav.append(h("a", { class: "btn small", href: page(Math.max(0, offset - 20)) }, "Previous"));
      if (offset + r.hits.length < r.total) nav.append(h("a", { class: "btn small", href: page(offset + 20) }, "Next"));
      out.replaceChildren(h("div", { class: "card" },
        h("p", { class: "muted", id: "search-total" }, num(r.total) + " result" + (r.total === 1 ? "" : "s") + (r.total ? ", " + (offset + 1) + "–" + (offset + r.hits.length) : "")),
        r.hits.length ? r.hits.map((hit) => h("div", { class: "hit" },
          h("div", { class: "t" }, h("a", { href: hit.url, rel: "noreferrer", target: "_blank" }, hit.title || hit.url)),
          h("div", { class: "u" }, hit.url),
          hit.snippet || hit.description ? h("p", { class: "s" }, hit.snippet || hit.description) : null,
          h("div", { class: "m" }, h("span", {}, hit.content_type || ""), h("span", {}, bytes(hit.size)), h("span", {}, "fetched ", when(hit.fetch_time)),
            h("a", { href: urlPage(hit.crawl_id, hit.url) }, "record"),
            h("a", { href: crawlPath(hit.crawl_id) + "/warc?key=" + enc(hit.id), target: "_blank" }, "WARC record"),
            h("a", { href: "#/crawl/" + enc(hit.crawl_id), class: "mono" }, hit.crawl_id)))) : h("p", { class: "empty" }, "No document matches."),
        nav));
    } catch (e) {
      out.replaceChildren(h("div", { class: "card err" }, e.message));
    }
  })();
}

// ---- one URL --------------------------------------------------------------

function pageURL(main, _, params) {
  const crawlSel = h("select", { id: "url-crawl", required: true, dataset: { all: "choose a crawl" } });
  const u = h("input", { type: "url", id: "url-input", placeholder: "https://…", value: params.get("url") || "" });
  u.style.flex = "1";
  const out = h("div", { id: "url-record" });
  crawlOptions(crawlSel, params.get("crawl") || "");
  main.append(h("h1", {}, "URL"), h("div", { class: "card" }, h("form", { class: "row", onsubmit: (ev) => {
    ev.preventDefault();
    location.hash = urlPage(crawlSel.value, u.value.trim());
  } }, crawlSel, u, h("button", { class: "btn primary", type: "submit" }, "Look up"))), out);
  const crawl = params.get("crawl");
  const url = params.get("url");
  if (!crawl || !url) return;
  (async () => {
    try {
      const r = await api("GET", crawlPath(crawl) + "/urls?" + new URLSearchParams({ url }));
      const w = r.warc;
      out.replaceChildren(h("div", { class: "card" },
        h("div", { class: "head" }, h("h2", { class: "url" }, r.url), badge(r.status)),
        h("dl", { class: "kv" },
          h("dt", {}, "Crawl"), h("dd", {}, h("a", { href: "#/crawl/" + enc(crawl), class: "mono" }, crawl)),
          h("dt", {}, "Status"), h("dd", {}, r.status, " · ", when(r.status_time)),
          r.reason ? [h("dt", {}, "Reason"), h("dd", { class: noFailure(r.reason) ? "muted" : "err", id: "url-reason" }, r.reason)] : null,
          h("dt", {}, "HTTP status"), h("dd", {}, r.http_status ? String(r.http_status) : "–"),
          h("dt", {}, "Host"), h("dd", {}, r.host || "–"),
          h("dt", {}, "Depth · hops"), h("dd", {}, num(r.depth), " · ", num(r.hops)),
          h("dt", {}, "Linked from"), h("dd", { class: "url" }, r.referrer ? h("a", { href: urlPage(crawl, r.referrer) }, r.referrer) : "start URL"),
          h("dt", {}, "MIME type"), h("dd", {}, r.mime_type || "–"),
          h("dt", {}, "Size"), h("dd", {}, bytes(r.bytes)),
          h("dt", {}, "Rendered"), h("dd", { id: "url-render" }, rendered(r)),
          h("dt", { title: "How often the recovery sweep sent the URL to the loaders again after its work stalled (a lost contract, a crashed loader): 0 for a URL fetched on its first delivery" }, "Redeliveries"),
          h("dd", { id: "url-attempts" }, r.attempts ? num(r.attempts) : "none"),
          h("dt", {}, "First seen"), h("dd", {}, when(r.created_at)),
          h("dt", {}, "WARC record"), h("dd", {}, w ? [h("a", { href: w.url, target: "_blank", id: "warc-link" }, "open"),
            h("span", { class: "muted mono" }, " ", w.segment, " @ ", num(w.offset), " (", bytes(w.length), ")")] : "–"),
          h("dt", {}, "Key"), h("dd", { class: "mono" }, r.key)),
        r.recrawl ? recrawlView(r) : null,
        h("h2", { class: "section" }, "Status history"),
        (r.history || []).length ? h("ul", { class: "history" }, r.history.map((e) => h("li", {}, badge(e.status), " ", when(e.time),
          h("span", { class: "muted mono" }, " ", stamp(e.time))))) : h("p", { class: "muted" }, "No history recorded."),
        h("p", {}, h("a", { href: r.url, rel: "noreferrer", target: "_blank" }, "Open the live page ↗"))));
    } catch (e) {
      out.replaceChildren(h("div", { class: "card err" }, e.status === 404 ? "No record of this URL in crawl " + crawl + "." : e.message));
    }
  })();
}

// rendered says whether the loader rendered the page in a headless browser,
// and why: "no" for a page fetched over plain HTTP, "–" before any fetch.
function rendered(r) {
  if (r.render) return r.render;
  return r.http_status ? "no" : "–";
}

// recrawlView is a URL's recrawl state in a continuous crawl: its last
// fetch, its next one, its interval, how often it changed or not, and the
// validators sent with the next fetch.
function recrawlView(r) {
  const rc = r.recrawl;
  const settled = ["indexed", "redirected", "failed", "sitemap"].includes(r.status);
  const next = r.next_due ? [nextDue(r.next_due), h("span", { class: "muted mono" }, " ", stamp(r.next_due))]
    : h("span", { class: "muted" }, settled ? "not scheduled" : "being fetched again");
  const none = () => h("span", { class: "muted" }, "none");
  const at = (t) => (t && new Date(t).getFullYear() > 1970 ? [when(t), h("span", { class: "muted mono" }, " ", stamp(t))] : "–");
  return [h("h2", { class: "section" }, "Recrawl"),
    h("dl", { class: "kv", id: "url-recrawl" },
      h("dt", {}, "Last fetch"), h("dd", { id: "rc-fetched" }, at(rc.fetched), rc.status ? h("span", {}, " · HTTP " + rc.status) : null),
      h("dt", {}, "Next due"), h("dd", { id: "rc-next" }, next),
      h("dt", {}, "Interval"), h("dd", { id: "rc-interval" }, rc.interval_ms ? dur(rc.interval_ms) : "–"),
      h("dt", {}, "Changes"), h("dd", { id: "rc-changes" }, num(rc.changes || 0), h("span", { class: "muted" }, " fetches found new content (parsed and indexed again)")),
      h("dt", {}, "Revisits"), h("dd", { id: "rc-revisits" }, num(rc.revisits || 0), h("span", { class: "muted" }, " fetches found it unchanged (stored as WARC revisit records)")),
      h("dt", {}, "ETag"), h("dd", { class: "mono", id: "rc-etag" }, rc.etag || none()),
      h("dt", {}, "Last-Modified"), h("dd", { class: "mono", id: "rc-last-modified" }, rc.last_modified || none()),
      h("dt", {}, "Payload digest"), h("dd", { class: "mono" }, rc.digest || none()),
      h("dt", {}, "Stored response"), h("dd", {}, rc.record_id ? [h("span", { class: "mono" }, rc.record_id), " · ", at(rc.stored)] : none()))];
}

// Start once every page function above is defined (a module runs after the
// document is parsed).
window.addEventListener("hashchange", route);
route();
