-- wrk's requests for scripts/bench: GET of the URL's path (`/` for most
-- runs) with `x-user` one of 100,000 users at random; at the end one JSON
-- line with the figures.
math.randomseed(1)
request = function()
  return wrk.format("GET", wrk.path, { ["x-user"] = tostring(math.random(0, 99999)) })
end
done = function(summary, latency, requests)
  local s = summary.duration / 1e6
  io.write(string.format(
    '{"requests":%d,"secs":%.3f,"requests_per_sec":%.1f,"non_2xx_3xx":%d,"socket_errors":%d,' ..
    '"latency_us":{"p50":%d,"p99":%d,"p999":%d,"max":%d,"mean":%.1f}}\n',
    summary.requests, s, summary.requests / s, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max, latency.mean))
end
