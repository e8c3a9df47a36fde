-- wrk script: print the latency percentiles the demo reports, in microseconds.
done = function(summary, latency, requests)
  io.write(string.format("LATENCY p50=%d p99=%d p999=%d requests=%d errors=%d\n",
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9),
    summary.requests, summary.errors.connect + summary.errors.read + summary.errors.write +
    summary.errors.status + summary.errors.timeout))
end
