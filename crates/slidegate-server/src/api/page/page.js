// slidegate's status page: everything from GET /v1/stats, every 2 s.
// Every string from the server goes into the page as text (textContent),
// never as markup: identities are whatever clients sent.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
let token = "";

function text(id, value) {
  document.getElementById(id).textContent = value;
}

function cell(row, value, className) {
  const td = document.createElement("td");
  td.textContent = value;
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function duration(ms) {
  if (ms >= 86400000 && ms % 86400000 === 0) return ms / 86400000 + " d";
  if (ms >= 3600000 && ms % 3600000 === 0) return ms / 3600000 + " h";
  if (ms >= 60000 && ms % 60000 === 0) return ms / 60000 + " min";
  // A wait: its largest two units.
  if (ms >= 3600000) return Math.floor(ms / 3600000) + " h " + Math.floor((ms % 3600000) / 60000) + " min";
  if (ms >= 60000) return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
  if (ms >= 1000) return ms / 1000 + " s";
  return ms + " ms";
}

function micros(us) {
  return us >= 1000 ? (us / 1000).toFixed(1) + " ms" : Math.round(us) + " µs";
}

// A small chart of two series (admitted, limited) as SVG polylines, and
// its scale: the peak second it shows. Five idle minutes draw one grey line.
function sparkline(admitted, limited) {
  const chart = document.createElement("span");
  const svg = document.createElementNS(SVG, "svg");
  const peak = Math.max(0, ...admitted, ...limited);
  svg.setAttribute("class", peak === 0 ? "spark idle" : "spark");
  svg.setAttribute("viewBox", "0 0 300 28");
  svg.setAttribute("preserveAspectRatio", "none");
  const top = Math.max(1, peak);
  for (const [series, name] of [[admitted, "admitted"], [limited, "limited"]]) {
    const line = document.createElementNS(SVG, "polyline");
    line.setAttribute("class", name);
    line.setAttribute("points", series.map((v, i) => i + "," + (27 - (v / top) * 26).toFixed(1)).join(" "));
    svg.appendChild(line);
  }
  const scale = document.createElement("span");
  scale.className = "scale muted";
  scale.textContent = peak === 0 ? "idle" : "peak " + peak + "/s";
  chart.append(svg, scale);
  return chart;
}

// Requests per edge (RLS, the HTTP API, the gateway).
function renderEdges(edges) {
  const body = document.querySelector("#edges tbody");
  body.replaceChildren();
  for (const [name, label] of [["rls", "RLS (gRPC)"], ["http", "HTTP API"], ["gateway", "gateway"]]) {
    const edge = edges[name];
    const row = document.createElement("tr");
    row.dataset.edge = name;
    cell(row, label);
    cell(row, String(lastSecond(edge.admitted)), "admitted-now");
    cell(row, String(lastSecond(edge.limited)), "limited-now");
    cell(row, sum(edge.admitted) + " admitted, " + sum(edge.limited) + " limited").dataset.sort = sum(edge.admitted) + sum(edge.limited);
    cell(row, "").appendChild(sparkline(edge.admitted, edge.limited));
    body.appendChild(row);
  }
}

function count(n, one, many) {
  return n + " " + (n === 1 ? one : many);
}

function sum(series) {
  return series.reduce((a, b) => a + b, 0);
}

function renderLimits(limits, gatewayOnly) {
  const body = document.querySelector("#limits tbody");
  body.replaceChildren();
  document.getElementById("no-limits").hidden = limits.length > 0 || gatewayOnly;
  document.getElementById("gateway-only").hidden = !gatewayOnly;
  for (const entry of limits) {
    const limit = entry.limit;
    const row = document.createElement("tr");
    row.dataset.key = entry.key;
    cell(row, entry.domain);
    cell(row, entry.key, "identity");
    cell(row, limit.name || "");
    cell(row, limit.algorithm === "unlimited" ? "unlimited" : String(limit.requests_per_unit));
    cell(row, limit.algorithm === "unlimited" ? "" : duration(limit.window_ms)).dataset.sort = limit.window_ms ?? 0;
    cell(row, limit.algorithm);
    cell(row, limit.shadow_mode ? "shadow" : "");
    cell(row, String(lastSecond(entry.admitted)), "admitted-now");
    cell(row, String(lastSecond(entry.limited)), "limited-now");
    cell(row, "").appendChild(sparkline(entry.admitted, entry.limited));
    const usage = entry.usage || [];
    cell(row, describeUsage(usage), "in-use").dataset.sort = usage.reduce((most, u) => Math.max(most, u.used), 0);
    body.appendChild(row);
  }
}

// A budget's or max_in_flight limit's use by the identities seen last:
// "api: tenant=acme 1400 of 1000 (debt 400), 3 s ago", the first three.
function describeUsage(usage) {
  const now = Date.now();
  const shown = usage.slice(0, 3).map(u =>
    u.identity + " " + u.used + " of " + u.limit + (u.debt ? " (debt " + u.debt + ")" : "") +
    ", " + ago(u.at_unix_ms, now));
  if (usage.length > 3) shown.push("+" + (usage.length - 3) + " more");
  return shown.join("; ");
}

function describeLimit(limit) {
  return limit.rule + " (" + limit.key + "): " + limit.limit.requests_per_unit + " / " +
    duration(limit.limit.window_ms) + ", " + limit.limit.algorithm;
}

// The gateway's routes, when the service is a gateway (else the section stays hidden).
function renderGateway(gateway) {
  document.getElementById("gateway-section").hidden = !gateway;
  if (!gateway) return;
  text("gateway-file", gateway.file);
  text("gateway-hash", gateway.hash);
  const body = document.querySelector("#routes tbody");
  body.replaceChildren();
  for (const route of gateway.routes) {
    const row = document.createElement("tr");
    row.dataset.route = route.name;
    cell(row, route.name);
    cell(row, route.host || "any");
    cell(row, route.path_prefix);
    cell(row, route.methods.length ? route.methods.join(", ") : "any");
    cell(row, route.upstreams.join(", "));
    const inFlight = (route.max_in_flight || []).map(l => l.limit + " (" + l.key + "): at most " + l.max_in_flight + " at once");
    const limits = route.limits.map(describeLimit).concat(inFlight);
    cell(row, limits.length ? limits.join("; ") : "none");
    const held = route.limits.map(l => [l.rule, l.usage]).concat((route.max_in_flight || []).map(l => [l.limit, l.usage]))
      .filter(([, usage]) => usage && usage.length);
    cell(row, held.map(([name, usage]) => name + ": " + describeUsage(usage)).join("; "), "in-use").dataset.sort =
      held.reduce((most, [, usage]) => Math.max(most, ...usage.map(u => u.used)), 0);
    cell(row, String(lastSecond(route.admitted)), "admitted-now");
    cell(row, String(lastSecond(route.limited)), "limited-now");
    cell(row, "").appendChild(sparkline(route.admitted, route.limited));
    const upstream = route.upstream;
    const errors = cell(row, String(upstream.failed_5m) + " of " + (upstream.answered_5m + upstream.failed_5m), "upstream-errors");
    errors.dataset.sort = upstream.failed_5m;
    if (upstream.failed_5m > 0) errors.className += " bad";
    const latency = upstream.latency_us;
    cell(row, latency ? micros(latency.p50) + " / " + micros(latency.p99) : "no answers").dataset.sort = latency ? latency.p99 : -1;
    body.appendChild(row);
  }
}

// The last whole second of a series (the current one is still counting).
function lastSecond(series) {
  return series.length ? series[series.length - 2] ?? 0 : 0;
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? String(n) : n.toFixed(1)) + " " + units[i];
}

// Redis's memory and keys (sampled by the service, never KEYS); hidden for the embedded store.
function renderServers(servers) {
  for (const element of document.querySelectorAll(".redis")) element.hidden = !servers;
  if (!servers) return;
  if (servers.error) {
    text("store-memory", "cannot read: " + servers.error);
    text("store-keys", "–");
    return;
  }
  text("store-memory", bytes(servers.used_memory_bytes));
  const estimate = servers.sampled > 0 && servers.slidegate_keys !== servers.keys && servers.slidegate_keys !== 0;
  text("store-keys", servers.keys + " (" + (estimate ? "≈ " : "") + servers.slidegate_keys + ")");
}

// How long ago `ms` (since the UNIX epoch) was, at `now` (the same).
function ago(ms, now) {
  const seconds = Math.max(0, Math.round((now - ms) / 1000));
  return seconds < 60 ? seconds + " s ago" : seconds < 3600 ? Math.round(seconds / 60) + " min ago" : Math.round(seconds / 3600) + " h ago";
}

function renderTop(top, now) {
  const body = document.querySelector("#top tbody");
  body.replaceChildren();
  document.getElementById("no-top").hidden = top.length > 0;
  for (const element of document.querySelectorAll(".admin-only")) element.hidden = !token;
  for (const heavy of top) {
    const row = document.createElement("tr");
    cell(row, heavy.identity, "identity");
    cell(row, heavy.limit);
    // The wait its last denial announced, counted down to now.
    const left = Math.max(0, heavy.retry_after_ms - (now - heavy.last_unix_ms));
    const banned = heavy.state === "banned" && left > 0;
    const state = cell(row, banned ? "banned until " + new Date(heavy.last_unix_ms + heavy.retry_after_ms).toLocaleTimeString() :
      heavy.state === "reset" ? "reset by an operator" : heavy.state === "banned" ? "ban over" :
      left > 0 ? "limited" : "admitted again", banned ? "state banned" : "state");
    state.dataset.sort = banned ? 2 : left > 0 ? 1 : 0;
    cell(row, String(heavy.limited_5m));
    cell(row, String(heavy.count));
    cell(row, String(heavy.error));
    cell(row, String(heavy.remaining));
    cell(row, left > 0 ? duration(left >= 1000 ? Math.ceil(left / 1000) * 1000 : left) : "now").dataset.sort = left;
    cell(row, ago(heavy.last_unix_ms, now)).dataset.sort = now - heavy.last_unix_ms;
    if (token) {
      const actions = cell(row, "", "admin-only");
      if (heavy.descriptor) {
        const button = document.createElement("button");
        button.type = "button";
        button.className = "reset-row";
        button.textContent = "reset";
        button.title = "Forget the counters of every limit this descriptor meets";
        const descriptor = heavy.descriptor;
        button.addEventListener("click", () => admin("DELETE", "/v1/state", { domain: descriptor.domain, descriptors: [{ entries: descriptor.entries }] }));
        actions.appendChild(button);
      } else {
        actions.textContent = "too long to reset here";
      }
    }
    body.appendChild(row);
  }
}

function renderMisses(domains, descriptors) {
  const body = document.querySelector("#misses tbody");
  body.replaceChildren();
  document.getElementById("misses-section").hidden = domains.length + descriptors.length === 0;
  // In the header too: limiting is off for these requests.
  const [unknown, unmatched] = [sum(domains.map((m) => m.count)), sum(descriptors.map((m) => m.count))];
  const link = document.getElementById("misses-count");
  link.hidden = unknown + unmatched === 0;
  link.textContent = count(unknown, "request", "requests") + " for unknown domains, " + count(unmatched, "request", "requests") +
    " matching no limit";
  for (const [kind, missed] of [["unknown domain", domains], ["no limit matches", descriptors]]) {
    for (const miss of missed) {
      const row = document.createElement("tr");
      cell(row, kind);
      cell(row, miss.name, "identity");
      cell(row, String(miss.count));
      body.appendChild(row);
    }
  }
}

// Sorting and filtering the tables: each table's view (the column it is
// sorted by, the order, the filter) lives in the address's fragment, so a
// view survives the refresh and can be shared:
// #limits.sort=8&limits.desc=1&limits.filter=login
const TABLES = ["edges", "limits", "routes", "top", "misses"];
const view = new URLSearchParams(location.hash.slice(1));

function saveView() {
  history.replaceState(null, "", "#" + view.toString());
}

// A cell's value to sort by: a number when it reads as one.
function sortKey(row, column) {
  const cell = row.cells[column];
  if (cell?.dataset.sort !== undefined) return Number(cell.dataset.sort);
  const text = cell?.textContent ?? "";
  const number = Number.parseFloat(text);
  return Number.isFinite(number) && /^[\d.]/.test(text) ? number : text.toLowerCase();
}

// Puts a table's rows in its view's order and hides those the filter leaves out.
function arrange(id) {
  const table = document.getElementById(id);
  const body = table.tBodies[0];
  const column = Number.parseInt(view.get(id + ".sort") ?? "", 10);
  const desc = view.get(id + ".desc") === "1";
  const filter = (view.get(id + ".filter") ?? "").toLowerCase();
  const rows = Array.from(body.rows);
  if (Number.isInteger(column)) {
    rows.sort((a, b) => {
      const [x, y] = [sortKey(a, column), sortKey(b, column)];
      const order = typeof x === typeof y ? (x < y ? -1 : x > y ? 1 : 0) : typeof x === "number" ? -1 : 1;
      return desc ? -order : order;
    });
    body.append(...rows);
  }
  let shown = 0;
  for (const row of rows) {
    row.hidden = filter !== "" && !row.textContent.toLowerCase().includes(filter);
    if (!row.hidden) shown++;
  }
  for (const [i, th] of Array.from(table.tHead.rows[0].cells).entries()) {
    th.dataset.sorted = i === column ? (desc ? "desc" : "asc") : "";
  }
  const count = document.getElementById(id + "-shown");
  if (count) count.textContent = filter ? shown + " of " + rows.length + " shown" : "";
}

for (const id of TABLES) {
  const table = document.getElementById(id);
  const input = document.createElement("input");
  input.type = "search";
  input.placeholder = "filter";
  input.className = "filter";
  input.id = id + "-filter";
  input.value = view.get(id + ".filter") ?? "";
  const count = document.createElement("span");
  count.id = id + "-shown";
  count.className = "muted";
  table.before(input, " ", count);
  input.addEventListener("input", () => {
    if (input.value) view.set(id + ".filter", input.value); else view.delete(id + ".filter");
    saveView();
    arrange(id);
  });
  table.tHead.addEventListener("click", (event) => {
    const th = event.target.closest("th");
    if (!th) return;
    const column = String(th.cellIndex);
    const desc = view.get(id + ".sort") === column && view.get(id + ".desc") !== "1";
    view.set(id + ".sort", column);
    view.set(id + ".desc", desc ? "1" : "0");
    saveView();
    arrange(id);
  });
}

function render(stats) {
  const store = stats.store;
  text("store-kind", store.kind);
  const connection = document.getElementById("store-connection");
  connection.textContent = store.connected ? "connected" : "disconnected" + (store.waiting_for ? ": " + store.waiting_for : "");
  connection.className = store.connected ? "ok" : "bad";
  const breaker = document.getElementById("store-breaker");
  breaker.textContent = store.breaker;
  breaker.className = store.breaker === "closed" ? "ok" : "bad";
  text("store-latency", store.latency_us ? micros(store.latency_us.p50) + " / " + micros(store.latency_us.p99) : "no calls");
  const degraded = sum(store.degraded);
  text("store-degraded", lastSecond(store.degraded) + "/s now, " + degraded + " in the last 5 min, " +
    store.degraded_total + " since start");
  document.getElementById("store-degraded").className = degraded > 0 ? "bad" : "";
  document.getElementById("store-degraded-chart").replaceChildren(sparkline(store.degraded.map(() => 0), store.degraded));
  renderServers(store.servers);
  const rules = stats.config.files.length > 0;
  text("config-hash", rules ? stats.config.hash : "no rules (gateway only)");
  text("config-files", rules ? stats.config.files.join(", ") : "–");
  const reload = stats.config.last_reload;
  const reloadText = reload.result + " at " + new Date(reload.at_unix_s * 1000).toLocaleTimeString() +
    (reload.errors.length ? ": " + reload.errors.join("; ") : "");
  const reloadCell = document.getElementById("config-reload");
  reloadCell.textContent = reloadText;
  reloadCell.className = reload.result === "ok" ? "" : "bad";
  // A failed reload keeps the configuration before it in force: say so at the top.
  const banner = document.getElementById("reload-banner");
  banner.hidden = reload.result === "ok";
  banner.textContent = reload.result === "ok" ? "" : "The last reload failed (" +
    new Date(reload.at_unix_s * 1000).toLocaleTimeString() + "); the configuration before it is still in force: " +
    reload.errors.join("; ");
  const uptime = stats.now_unix_s - stats.started_unix_s;
  text("version", "slidegate " + stats.version + " on " + stats.instance + ", up " + (uptime < 3600 ? Math.floor(uptime / 60) + " min" :
    uptime < 86400 ? Math.floor(uptime / 3600) + " h" : Math.floor(uptime / 86400) + " d"));
  // The admin actions exist only where the service was given an admin token.
  document.getElementById("admin").hidden = !stats.admin_api;
  renderEdges(stats.edges);
  renderLimits(stats.limits, stats.config.files.length === 0 && !!stats.gateway);
  renderGateway(stats.gateway);
  renderTop(stats.top_limited, stats.now_unix_ms);
  renderMisses(stats.unknown_domains, stats.unmatched_descriptors);
  TABLES.forEach(arrange);
  text("updated", "updated " + new Date(stats.now_unix_s * 1000).toLocaleTimeString());
  document.body.dataset.loaded = "true";
}

async function refresh() {
  try {
    const response = await fetch("/v1/stats", { cache: "no-store" });
    if (!response.ok) throw new Error("HTTP " + response.status);
    render(await response.json());
  } catch (error) {
    text("updated", "cannot reach the service: " + error.message);
  }
}

// An admin call; its answer, or why it could not be made, in #admin-result
// (never the previous answer left standing).
async function admin(method, path, body) {
  text("admin-result", "");
  try {
    const response = await fetch(path, {
      method,
      headers: { "authorization": "Bearer " + token, "content-type": "application/json" },
      body: body ? JSON.stringify(body) : undefined,
    });
    const answer = await response.text();
    text("admin-result", response.status + " " + answer);
  } catch (error) {
    text("admin-result", "cannot send: " + error.message);
  }
  refresh();
}

document.getElementById("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  token = document.getElementById("token").value;
  document.getElementById("admin-actions").hidden = token.length === 0;
  refresh();
});
document.getElementById("reload").addEventListener("click", () => admin("POST", "/v1/reload"));
// `key=value, key=value`: a descriptor's entries, in order.
function entriesOf(text) {
  return text.split(",").map((part) => part.trim()).filter((part) => part !== "").map((part) => {
    const at = part.indexOf("=");
    return at < 0 ? { key: part, value: "" } : { key: part.slice(0, at).trim(), value: part.slice(at + 1).trim() };
  });
}

document.getElementById("reset-form").addEventListener("submit", (event) => {
  event.preventDefault();
  admin("DELETE", "/v1/state", {
    domain: document.getElementById("reset-domain").value,
    descriptors: [{ entries: entriesOf(document.getElementById("reset-entries").value) }],
  });
});

refresh();
setInterval(refresh, 2000);
