#!/usr/bin/env python3
"""The section "The service and the gateway" of BENCHMARKS.md, and its chart.

usage: bench_service_report.py RUN_DIR SECTION.md CHART.svg

RUN_DIR is what scripts/bench (with scripts/bench_service) wrote: one
`slidegate bench --target --json` object per run (NAME.json), wrk's JSON
line for the gateway runs, commands.tsv, and service/ (logs, versions,
reload-at-N.txt, reloads-N.txt). Every ratio is between figures of that run.
A peer that was not there (no limitador-server, no nginx) leaves its
targets "not run".
"""

import json
import math
import os
import sys

from bench_chart import line_chart

run_dir, md_path, svg_path = sys.argv[1:4]
ROUNDS = (1, 2, 3)
MB = 1_000_000


def path(name):
    return os.path.join(run_dir, name + ".json")


def have(name):
    return os.path.exists(path(name))


def load(name):
    with open(path(name)) as f:
        return json.load(f)


def text(name, default=""):
    p = os.path.join(run_dir, "service", name)
    return open(p).read().strip() if os.path.exists(p) else default


def median(values):
    return sorted(values)[len(values) // 2]


def dps(r):
    return r["decisions_per_sec"]


def cpu(r):
    return r["processes"][0]["cpu_us_per_decision"]


def listed(values, fmt="{:,.0f}"):
    return ", ".join(fmt.format(v) for v in values)


rows = []  # (number, what, measured, baseline, ratio text, met: True/False/None)


def target(number, what, measured, baseline, ratio, op, bound):
    met = ratio <= bound if op == "<=" else ratio >= bound
    rows.append((number, what, measured, baseline, f"{ratio:.2f}× ({op} {bound}×)", met))


def not_run(number, what, why):
    rows.append((number, what, "not run", why, "–", None))


def runs(prefix):
    return [load(f"{prefix}-{n}") for n in ROUNDS] if all(have(f"{prefix}-{n}") for n in ROUNDS) else None


serve, limitador, floor, check = runs("rls-serve"), runs("rls-limitador"), runs("rls-floor"), runs("http-check")
check2 = runs("h2c-check")
library, layer = runs("cpu-log"), runs("cpu-layer")
serve_rate = median([dps(r) for r in serve])
serve_p99 = median([r["latency_us"]["p99"] for r in serve])
serve_cpu = median([cpu(r) for r in serve])
errors = sum(r["errors"] for group in (serve, limitador or [], floor, check, check2 or []) for r in group)

# 1. RLS on Redis against limitador on the same Redis.
what1 = "RLS on Redis, 64 in flight: decisions/s against limitador-server on the same Redis (medians of 3 rounds)"
if limitador:
    lim_rate = median([dps(r) for r in limitador])
    lim_p99 = median([r["latency_us"]["p99"] for r in limitador])
    target(1, what1, f"{serve_rate:,.0f}/s ({listed(dps(r) for r in serve)})",
           f"limitador {lim_rate:,.0f}/s ({listed(dps(r) for r in limitador)})", serve_rate / lim_rate, ">=", 2.0)
    target(1, "same runs: p99 latency", f"{serve_p99:,} µs ({listed((r['latency_us']['p99'] for r in serve), '{}')})",
           f"limitador {lim_p99:,} µs ({listed((r['latency_us']['p99'] for r in limitador), '{}')})",
           serve_p99 / lim_p99, "<=", 0.5)
else:
    not_run(1, what1, "no limitador-server (SLIDEGATE_LIMITADOR)")

# 2. Against the transport's floor; CPU per decision of each server.
floor_rate = median([dps(r) for r in floor])
floor_cpu = median([cpu(r) for r in floor])
lim_cpu = f"; limitador {median([cpu(r) for r in limitador]):.1f} µs" if limitador else ""
target(2, "RLS through `serve` on Redis against a do-nothing tonic RLS server (the floor), same generator (medians)",
       f"{serve_rate:,.0f}/s", f"floor {floor_rate:,.0f}/s ({listed(dps(r) for r in floor)})",
       serve_rate / floor_rate, ">=", 0.7)
rows.append((2, "CPU per decision of the server process (/proc, medians)", f"serve {serve_cpu:.1f} µs",
             f"floor {floor_cpu:.1f} µs{lim_cpu}", "reported", None))
if library and layer:
    lib_rate, layer_rate = median([dps(r) for r in library]), median([dps(r) for r in layer])
    rows.append((2, "RLS through `serve` against the in-process library on the same Redis (`Limiter::check` and the "
                 "tower layer, same keys and limit, 64 in flight; scripts/bench's cpu-log and cpu-layer runs, medians)",
                 f"serve {serve_rate:,.0f}/s",
                 f"`Limiter::check` {lib_rate:,.0f}/s; tower layer {layer_rate:,.0f}/s",
                 f"reported: serve is {serve_rate / lib_rate:.2f}× the library", None))

# 3. HTTP /v1/check against RLS.
check_rate = median([dps(r) for r in check])
if check2:
    check2_rate = median([dps(r) for r in check2])
    target(3, "HTTP `/v1/check` over HTTP/2 without TLS (h2c, 4 connections: RLS's transport) against RLS on the "
           "same serve (medians)",
           f"{check2_rate:,.0f}/s ({listed(dps(r) for r in check2)}); serve {median([cpu(r) for r in check2]):.1f} µs "
           "CPU per decision", f"RLS {serve_rate:,.0f}/s", check2_rate / serve_rate, ">=", 0.8)
target(3, "HTTP `/v1/check` over HTTP/1.1 keep-alive (64 connections, one request in flight on each: a read and a "
       "write per request on each side) against RLS on the same serve (medians)",
       f"{check_rate:,.0f}/s ({listed(dps(r) for r in check)}); serve {median([cpu(r) for r in check]):.1f} µs CPU per decision",
       f"RLS {serve_rate:,.0f}/s", check_rate / serve_rate, ">=", 0.8)

# 4. The gateway against nginx limit_req.
gw = {k: runs(f"gw-{k}") for k in ("direct", "nginx", "slidegate", "slidegate-redis")}
gw1 = {k: runs(f"gw1-{k}") for k in ("direct", "nginx", "slidegate", "slidegate-redis")}
what4 = "gateway against nginx `limit_req` (same upstream, wrk -c64, memory store; medians of 3 rounds): requests/s"
if all(gw.values()) and all(gw1.values()):
    rate = {k: median([r["requests_per_sec"] for r in v]) for k, v in gw.items()}
    p50 = {k: median([r["latency_us"]["p50"] for r in v]) for k, v in gw1.items()}
    p50_64 = {k: median([r["latency_us"]["p50"] for r in v]) for k, v in gw.items()}
    target(4, what4, f"{rate['slidegate']:,.0f}/s ({listed(r['requests_per_sec'] for r in gw['slidegate'])}); "
           f"Redis store {rate['slidegate-redis']:,.0f}/s",
           f"nginx {rate['nginx']:,.0f}/s ({listed(r['requests_per_sec'] for r in gw['nginx'])}); "
           f"upstream direct {rate['direct']:,.0f}/s", rate["slidegate"] / rate["nginx"], ">=", 1.0)
    added = {k: p50[k] - p50["direct"] for k in ("nginx", "slidegate", "slidegate-redis")}
    target(4, "added p50 latency over the upstream itself (wrk -c1: one request at a time; medians)",
           f"{added['slidegate']} µs (p50 {p50['slidegate']} µs); Redis store {added['slidegate-redis']} µs",
           f"nginx {added['nginx']} µs (p50 {p50['nginx']} µs; upstream {p50['direct']} µs); "
           f"at 64 connections p50 gateway {p50_64['slidegate']} µs, nginx {p50_64['nginx']} µs",
           added["slidegate"] / max(added["nginx"], 1), "<=", 1.2)
    floor, floor1 = runs("gw-floor"), runs("gw1-floor")
    if floor and floor1 and all("cpu_us_per_request" in r for r in gw["slidegate"] + gw["nginx"] + floor):
        def proxy_cpu(results):
            user = median([r["cpu_us_per_request"]["user"] for r in results])
            system = median([r["cpu_us_per_request"]["system"] for r in results])
            return f"user {user:.1f} + system {system:.1f} µs"
        floor_rate = median([r["requests_per_sec"] for r in floor])
        floor_added = median([r["latency_us"]["p50"] for r in floor1]) - p50["direct"]
        rows.append((4, "the proxy's floor: hyper passing requests on to the same upstream and nothing else (one upstream "
                     "connection per client connection; no routes, limits, forwarding headers, metrics or timeouts; "
                     "`crates/slidegate-server/examples/proxy_floor.rs`, bench-only), and each proxy's CPU per request "
                     "at 64 connections (/proc, medians)",
                     f"floor {floor_rate:,.0f}/s ({listed(r['requests_per_sec'] for r in floor)}), "
                     f"{floor_rate / rate['nginx']:.2f}× nginx, added p50 {floor_added} µs; CPU per request: "
                     f"gateway {proxy_cpu(gw['slidegate'])}, floor {proxy_cpu(floor)}",
                     f"nginx {proxy_cpu(gw['nginx'])}", "reported", None))
    plain, spelled = runs("gw-path-plain"), runs("gw-path-spelled")
    if plain and spelled:
        plain_rate = median([r["requests_per_sec"] for r in plain])
        spelled_rate = median([r["requests_per_sec"] for r in spelled])
        rows.append((4, "the path's normal form: requests for `//%61pi//users/%7e42/profile`, which the gateway "
                     "rewrites to `/api/users/~42/profile` before routing, against requests for that form itself "
                     "(wrk -c64, medians of 3)",
                     f"{spelled_rate:,.0f}/s ({listed(r['requests_per_sec'] for r in spelled)})",
                     f"in normal form {plain_rate:,.0f}/s ({listed(r['requests_per_sec'] for r in plain)})",
                     f"{spelled_rate / plain_rate:.2f}× (reported)", None))
else:
    not_run(4, what4, "no nginx or wrk")

# 5. Memory.
idle = load("serve-idle")["rss_kib"] * 1024
rows.append((5, "`serve` RSS idle (Redis store, rules loaded, listening)", f"{idle / MB:.1f} MB", "",
             "≤ 30 MB", idle <= 30 * MB))
mem_idle = load("memory-idle")["rss_kib"] * 1024
one_m, more = load("memory-1m"), load("memory-more")
rss_1m, rss_more = one_m["processes"][0]["rss_bytes"], more["processes"][0]["rss_bytes"]
peak = more["processes"][0]["peak_rss_bytes"]
rows.append((5, "RSS after 1,000,000 distinct identities on the embedded store (100/min each)",
             f"{rss_1m / MB:.0f} MB ({(rss_1m - mem_idle) / one_m['requests']:.0f} B per identity over idle "
             f"{mem_idle / MB:.1f} MB; {dps(one_m):,.0f} decisions/s, {one_m['errors']} errors)", "", "≤ 300 MB",
             rss_1m <= 300 * MB))
rows.append((5, "the same process after 1,500,000 more (the store holds at most 1,000,000 keys)",
             f"{rss_more / MB:.0f} MB (peak {peak / MB:.0f} MB; {more['denied']} denied, {more['errors']} errors)",
             f"after the first million {rss_1m / MB:.0f} MB", "≤ 300 MB, bounded", rss_more <= 300 * MB and peak <= 300 * MB))

# 6. Configuration scale.
loads = [load(f"load-10000-{n}") for n in ROUNDS]
load_s = median([r["seconds"] for r in loads])
rows.append((6, "10,000 descriptors loaded and checked (`serve --check`, the whole process; median of 3)",
             f"{load_s * 1000:.0f} ms ({listed((r['seconds'] * 1000 for r in loads), '{:.0f}')})", "",
             "≤ 1 s", load_s <= 1.0 and all(r["ok"] for r in loads)))


def matching(prefix):
    """CPU per decision (medians) of the 10- and 10,000-rule servers, and their texts."""
    m10, m10k = runs(f"{prefix}-10"), runs(f"{prefix}-10000")
    c10, c10k = median([cpu(r) for r in m10]), median([cpu(r) for r in m10k])
    return (c10, c10k, f"{c10k:.1f} µs ({median([dps(r) for r in m10k]):,.0f}/s; {listed((cpu(r) for r in m10k), '{:.1f}')})",
            f"10 rules {c10:.1f} µs ({median([dps(r) for r in m10]):,.0f}/s; {listed((cpu(r) for r in m10), '{:.1f}')})")


if runs("match-users-10") and runs("match-users-10000"):
    c10, c10k, measured, baseline = matching("match-users")
    target(6, "matching: server CPU per decision with 10,000 rules against 10, only the rule table differing (memory "
           "store; a per-`user` limit nested in each rule, requests `rule=r{key%N},user={key}`: the same 100,000 "
           "identities, and store keys, spread over the rules; medians of 3)", measured, baseline, c10k / c10, "<=", 1.2)
else:
    not_run(6, "matching: 10,000 rules against 10, only the rule table differing", "no match-users runs")
c10, c10k, measured, baseline = matching("match")
rows.append((6, "for comparison: each request a different rule's own counter (requests `rule=r{key}`: 10 counters "
             "against 10,000, so the store's state grows with the rules too, and the 10,000-rule server's first round "
             "allocates them)", measured, baseline, f"{c10k / c10:.2f}× (reported)", None))


def reload_round(n):
    """One reload run: its ratio, p99s, requests and whether it reloaded."""
    r = load(f"reload-{n}")
    at = float(text(f"reload-at-{n}.txt", "3"))
    during = [s for s in r["seconds"] if s["second"] in (math.floor(at), math.floor(at) + 1)]
    before = [s for s in r["seconds"] if 1 <= s["second"] < math.floor(at)]
    # The lower of the seconds before: the first of a fresh server may
    # still hold its warm-up (p99 of ~10 ms in some runs), and the upper
    # median of two seconds is their maximum, which flattered the ratio.
    p99_before = min(s["latency_us"]["p99"] for s in before) if before else 0
    p99_during = max((s["latency_us"]["p99"] for s in during), default=0)
    # `slidegate_config_reloads_total{result="ok"} 1` from the server's /metrics.
    reloaded = any(float(line.split()[-1]) >= 1
                   for line in text(f"reloads-{n}.txt").splitlines() if 'result="ok"' in line)
    return {"run": r, "at": at, "before": p99_before, "during": p99_during,
            "ratio": p99_during / max(p99_before, 1), "reloaded": reloaded}


reloads = [reload_round(n) for n in ROUNDS]
middle = sorted(reloads, key=lambda x: x["ratio"])[len(reloads) // 2]
requests = sum(x["run"]["requests"] for x in reloads)
offered = sum(x["run"]["offered_per_sec"] * x["run"]["elapsed_secs"] for x in reloads)
lost = sum(x["run"]["errors"] for x in reloads)
reloaded = all(x["reloaded"] for x in reloads)
each = ", ".join(f"{x['during']:,}/{x['before']:,} µs = {x['ratio']:.2f}×" for x in reloads)
target(6, f"reload to 10,000 descriptors under load (open loop at {middle['run']['offered_per_sec']:,.0f}/s, half the "
          f"peak; SIGHUP at {middle['at']:.1f} s; three runs, each on a fresh serve, the median by ratio): p99 in the "
          "reload's second and the next against the lower of the two seconds before",
       f"{middle['during']:,} µs (runs: {each}); {requests:,} requests of {offered:,.0f} offered, {lost} errors, "
       f"{'reloaded' if reloaded else 'NOT reloaded'} every time",
       f"before {middle['before']:,} µs", middle["ratio"], "<=", 2.0)
rows[-1] = rows[-1][:5] + (rows[-1][5] and lost == 0 and reloaded,)

# 7. Attack.
cache, nocache = load("attack-serve-cache"), load("attack-serve-nocache")
target(7, "attack through the service (one hot descriptor, 64 in flight): deny cache on against off",
       f"{dps(cache):,.0f}/s ({cache['denied']:,} denied)", f"off {dps(nocache):,.0f}/s", dps(cache) / dps(nocache),
       ">=", 10.0)

# The chart: RLS throughput against concurrency.
levels = [1, 4, 16, 64, 128, 256]
series = {"slidegate serve (Redis)": "serve", "limitador (Redis)": "limitador", "floor (no limiting)": "floor"}
colors = {"serve": "#1f77b4", "limitador": "#d62728", "floor": "#7f7f7f"}
points = {k: [dps(load(f"rls-sweep-{k}-{c}")) for c in levels] for k in series.values()
          if all(have(f"rls-sweep-{k}-{c}") for c in levels)}
line_chart(svg_path, "RLS decisions/s against requests in flight (100,000 keys, 100/min)",
           "requests in flight (4 HTTP/2 connections)", levels,
           [(label, colors[k], points[k]) for label, k in series.items() if k in points], legend=190)

versions = [v for v in (text("limitador-version.txt"), text("nginx-version.txt")) if v]
md = [
    "## The service and the gateway",
    "",
    "`slidegate serve` and its gateway beside their peers, in the same run: "
    "limitador-server on the same Redis (its Redis storage, a limits file equivalent to the rules: "
    "100 per minute per `user`), a do-nothing tonic RLS server (`crates/slidegate-server/examples/rls_floor.rs`, "
    "bench-only) for the transport's floor, and nginx `limit_req` in front of the same upstream as the gateway "
    f"({'; '.join(versions) if versions else 'peers not found'}). "
    "RLS and `/v1/check` are driven by `slidegate bench --target` (one runtime thread), the gateway and nginx by wrk "
    "(Debian). The servers, their peers and the load generator share core 0; Redis (and the gateway's upstream) "
    "run on core 1. CPU per decision is the server process's user + system time over the run (`/proc`).",
    "",
    "| # | what | slidegate | peer / baseline (same run) | ratio / bound | met |",
    "|---|---|---|---|---|---|",
]
for number, what, measured, baseline, ratio, met in rows:
    shown = "–" if met is None else "yes" if met else "**no**"
    md.append(f"| {number} | {what} | {measured} | {baseline} | {ratio} | {shown} |")
md += ["", "![RLS throughput against concurrency](docs/service-throughput.svg)", "",
       "RLS concurrency sweep (2 s per point, decisions/s; the chart above):", "",
       "| in flight | " + " | ".join(label for label, k in series.items() if k in points) + " |",
       "|---|" + "---|" * len(points)]
for i, c in enumerate(levels):
    md.append(f"| {c} | " + " | ".join(f"{points[k][i]:,.0f}" for k in series.values() if k in points) + " |")
if errors:
    md += ["", f"**{errors} requests failed in the RLS and /v1/check runs** (see their JSON)."]

with open(os.path.join(run_dir, "commands.tsv")) as f:
    executed = dict(line.rstrip("\n").split("\t", 1) for line in f if "\t" in line)
md += ["", "Runs of this section (each command as executed; `$REDIS` is the run's Redis):", "",
       "| run | command | decisions/s | p50 | p99 | p99.9 | errors | server CPU/decision |", "|---|---|---|---|---|---|---|---|"]
for name, command in executed.items():
    if not have(name) or not any(name.startswith(p) for p in
                                 ("rls-serve", "rls-limitador", "rls-floor", "http-check", "h2c-check", "reload", "match-",
                                  "attack-serve", "memory-1m", "memory-more", "gw")):
        continue
    r = load(name)
    if "requests_per_sec" in r:  # wrk
        lat = r["latency_us"]
        md.append(f"| {name} | `{command}` | {r['requests_per_sec']:,.0f} | {lat['p50']} µs | {lat['p99']} µs "
                  f"| {lat['p999']} µs | {r['socket_errors']} | |")
    else:
        lat = r["latency_us"]
        server = f"{cpu(r):.1f} µs" if r.get("processes") else ""
        md.append(f"| {name} | `{command}` | {dps(r):,.0f} | {lat['p50']} µs | {lat['p99']} µs | {lat['p999']} µs "
                  f"| {r['errors']} | {server} |")
with open(md_path, "w") as f:
    f.write("\n".join(md) + "\n")
