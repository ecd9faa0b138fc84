#!/usr/bin/env python3
"""Benchmarks of the client itself, each against a standalone `aiperf mock-server`.

    cargo build --release
    python3 bench/client.py ceiling   [runs]   # req/s, --fast mock, ISL 10, OSL 16, c=64, 20k
    python3 bench/client.py fidelity  [runs]   # client vs server timestamps at c=1, 64, 512
    python3 bench/client.py footprint [runs]   # peak RSS: vision command; 100k text at c=512
    python3 bench/client.py walltime  [runs]   # vision command: wall time - traffic time
    python3 bench/client.py memory    [runs]   # peak RSS growth: 100k vs 300k text; 10k images
    python3 bench/client.py all       [runs]
    python3 bench/client.py quick                # every bench once at a fiftieth of its size

Every bench runs `runs` times (default 3) and prints the median with min and max. The load
average is printed first: on a busy machine the figures are worse than the client can do.
`quick` checks that every bench still runs (CI runs it); its figures mean nothing.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("AIPERF_BIN") or os.path.join(
    os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"), "release", "aiperf")
TMP = tempfile.mkdtemp(prefix="aiperf-bench-")
# `quick`: every request count divided by this (CI's smoke run).
QUICK = 1


def scaled(count):
    """A bench's request count, scaled down in quick mode (never below 4)."""
    return max(4, count // QUICK)

# The README's vision command (the profile issue's): 20 requests, one 512x512 noise PNG each.
VISION = [
    "--model", "Qwen/Qwen2-VL-2B-Instruct", "--endpoint-type", "chat",
    "--image-width-mean", "512", "--image-height-mean", "512",
    "--synthetic-input-tokens-mean", "100", "--output-tokens-mean", "100",
    "--streaming", "--request-count", "20", "--concurrency", "4",
]


class Mock:
    """A standalone mock server on a free port; its URL is the last word of its first line."""

    def __init__(self, *args, workers=None):
        cmd = [BIN, "mock-server", "--port", "0", *args]
        if workers:
            cmd += ["--workers", str(workers)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().split()[-1]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait()


_runs = 0


def profile(url, args, quiet=True):
    """Runs `aiperf profile`; returns (wall s, peak RSS MB, summary JSON, artifact dir)."""
    global _runs
    _runs += 1
    out = os.path.join(TMP, f"run{_runs}")
    cmd = [BIN, "profile", "--url", url, "--tokenizer", "builtin", "--ui", "none",
           "--artifact-dir", out, *args]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL if quiet else None)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"aiperf profile failed ({status}): {' '.join(cmd)}")
    with open(os.path.join(out, "profile_export_aiperf.json")) as f:
        summary = json.load(f)
    return wall, usage.ru_maxrss / 1024, summary, out


def median_line(label, values, unit, fmt="{:.1f}"):
    m = statistics.median(values)
    print(f"{label}: median {fmt.format(m)} {unit} "
          f"(min {fmt.format(min(values))}, max {fmt.format(max(values))}, {len(values)} runs)")
    return m


def overhead_line(summary):
    o = summary.get("client_overhead") or {}
    lag = o.get("record_complete_lag") or {}
    return (f"cpu/request {o.get('cpu_per_request_us', 0):.0f} us, "
            f"client cpu {100 * (o.get('cpu_utilization') or 0):.0f}% of {o.get('cores')} cores, "
            f"record lag p99 {lag.get('p99_ms', 0):.2f} ms, saturated {100 * (o.get('saturated_share') or 0):.0f}%")


def ceiling(runs):
    """Completed streamed requests per second against the --fast mock."""
    args = ["--model", "m", "--endpoint-type", "chat", "--streaming",
            "--synthetic-input-tokens-mean", "10", "--output-tokens-mean", "16",
            "--concurrency", "64", "--request-count", str(scaled(20000))]
    rates = []
    with Mock("--fast", workers=1) as mock:
        profile(mock.url, [*args[:-1], str(scaled(2000))])  # warm the page cache and the server
        for i in range(runs):
            wall, rss, s, _ = profile(mock.url, args)
            rate = s["request_throughput"]["avg"]
            rates.append(rate)
            print(f"  run {i}: {rate:.0f} req/s (whole command {wall:.2f} s); {overhead_line(s)}")
    median_line("ceiling: streamed requests per second (target >= 15000)", rates, "req/s", "{:.0f}")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def pct(values, p):
    s = sorted(values)
    k = (len(s) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def fidelity(runs):
    """Client TTFT and last-token time against the server's own stamps, joined on X-Request-ID.

    Server stamps (wall ns, same host): received (body read), first_token and last_token (bytes
    handed to the socket). Client: request_start (before the pool checkout), request_sent (the
    connection took the body), first and last content chunk (start + TTFT, start + request
    latency). Per record:
      ttft diff   = client TTFT - server TTFT (adds the request's way in and the chunk's way out)
      first/last  = client arrival - server send of the first / last token (the way out only)
      inbound     = server received - client start, split into
      checkout    = client sent - client start (pool checkout, in the client) and
      wire        = server received - client sent (loopback, the server reading the request)
    """
    counts = {1: scaled(30), 64: scaled(640), 512: scaled(2048)}
    targets = {1: 0.5, 64: 0.5, 512: 2.0}
    for conc, n in counts.items():
        per_run = {k: [] for k in ("ttft", "first", "last", "inbound", "checkout", "wire")}
        for i in range(runs):
            record = os.path.join(TMP, f"server-{conc}-{i}.jsonl")
            with Mock("--ttft", "50", "--itl", "10", "--record-requests", record) as mock:
                _, _, s, out = profile(mock.url, [
                    "--model", "m", "--endpoint-type", "chat", "--streaming",
                    "--synthetic-input-tokens-mean", "100", "--output-tokens-mean", "16",
                    "--concurrency", str(conc), "--request-count", str(n),
                    "--warmup-request-count", str(conc), "--random-seed", str(i)])
            server = {r["x_request_id"]: r for r in read_jsonl(record)}
            d = {k: [] for k in per_run}
            for c in read_jsonl(os.path.join(out, "profile_export.jsonl")):
                # Warmup opened the connections; measure the requests that reuse them.
                # A successful record has no `error` key.
                if c.get("error") is not None or c["metadata"]["benchmark_phase"] != "profiling":
                    continue
                srv = server[c["metadata"]["x_request_id"]]
                start = c["metadata"]["request_start_ns"]
                ttft = c["metrics"]["time_to_first_token"]["value"] * 1e6
                latency = c["metrics"]["request_latency"]["value"] * 1e6
                d["ttft"].append((ttft - (srv["first_token_ns"] - srv["received_ns"])) / 1e6)
                d["first"].append((start + ttft - srv["first_token_ns"]) / 1e6)
                d["last"].append((start + latency - srv["last_token_ns"]) / 1e6)
                d["inbound"].append((srv["received_ns"] - start) / 1e6)
                sent = c["metadata"]["request_sent_ns"]
                d["checkout"].append((sent - start) / 1e6)
                d["wire"].append((srv["received_ns"] - sent) / 1e6)
            line = []
            for k, v in d.items():
                p50, p99 = pct(v, 50), pct([abs(x) for x in v], 99)
                per_run[k].append(p99)
                line.append(f"{k} p50 {p50:.3f} |p99| {p99:.3f}")
            print(f"  c={conc} run {i} ({len(d['ttft'])} records, ms): " + "; ".join(line))
            print(f"    {overhead_line(s)}")
        for k in per_run:
            median_line(f"fidelity c={conc}: |{k}| p99", per_run[k], "ms", "{:.3f}")
        print(f"  target for ttft and last: p99 under {targets[conc]} ms")


def footprint(runs):
    """Peak RSS of the vision command and of 100,000 text requests at concurrency 512."""
    vision, text = [], []
    with Mock("--ttft", "20", "--itl", "5") as mock:
        for i in range(runs):
            _, rss, s, _ = profile(mock.url, [*VISION, "--random-seed", str(i)])
            vision.append(rss)
            print(f"  vision run {i}: {rss:.1f} MB")
    with Mock("--fast") as mock:
        for i in range(runs):
            wall, rss, s, _ = profile(mock.url, [
                "--model", "m", "--endpoint-type", "chat", "--streaming",
                "--synthetic-input-tokens-mean", "10", "--output-tokens-mean", "16",
                "--concurrency", "512", "--request-count", str(scaled(100000))])
            text.append(rss)
            print(f"  100k text run {i}: {rss:.1f} MB in {wall:.1f} s; {overhead_line(s)}")
    median_line("footprint: vision command peak RSS (target < 60)", vision, "MB")
    median_line("footprint: 100k text requests at c=512 peak RSS (target < 200)", text, "MB")


def walltime(runs):
    """The vision command's wall time minus its traffic time (benchmark_duration)."""
    extra = []
    with Mock("--ttft", "20", "--itl", "5") as mock:
        for i in range(runs):
            wall, _, s, _ = profile(mock.url, [*VISION, "--random-seed", str(i)])
            traffic = s["benchmark_duration"]["avg"]
            extra.append(wall - traffic)
            print(f"  run {i}: whole command {wall:.3f} s, traffic {traffic:.3f} s")
    median_line("wall time beyond the traffic (target <= 0.3)", extra, "s", "{:.3f}")


def memory(runs):
    """Peak RSS of text runs of growing length at c=512 (BENCH_MEMORY_COUNTS, default
    100000,300000), the growth per extra request, and a vision run of 10,000 requests each
    with its own image (BENCH_MEMORY_IMAGE px square, default 128)."""
    counts = [scaled(int(c)) for c in os.environ.get("BENCH_MEMORY_COUNTS", "100000,300000").split(",")]
    peaks = {c: [] for c in counts}
    with Mock("--fast") as mock:
        for i in range(runs):
            for c in counts:
                wall, rss, s, _ = profile(mock.url, [
                    "--model", "m", "--endpoint-type", "chat", "--streaming",
                    "--synthetic-input-tokens-mean", "10", "--output-tokens-mean", "16",
                    "--extra-inputs", "ignore_eos:true",
                    "--concurrency", "512", "--request-count", str(c)])
                peaks[c].append(rss)
                print(f"  text {c} run {i}: {rss:.1f} MB in {wall:.1f} s; {overhead_line(s)}")
    for c in counts:
        median_line(f"memory: {c} text requests at c=512 peak RSS", peaks[c], "MB")
    lo, hi = counts[0], counts[-1]
    if hi > lo:
        grow = (statistics.median(peaks[hi]) - statistics.median(peaks[lo])) * 1024 * 1024 / (hi - lo)
        print(f"memory: growth {grow:.0f} bytes per request from {lo} to {hi} requests")
    px = os.environ.get("BENCH_MEMORY_IMAGE", "128")
    vision = []
    with Mock("--fast") as mock:
        for i in range(runs):
            wall, rss, s, out = profile(mock.url, [
                "--model", "Qwen/Qwen2-VL-2B-Instruct", "--endpoint-type", "chat", "--streaming",
                "--image-width-mean", px, "--image-height-mean", px,
                "--synthetic-input-tokens-mean", "100", "--output-tokens-mean", "16",
                "--num-dataset-entries", str(scaled(10000)), "--request-count", str(scaled(10000)),
                "--concurrency", "64", "--random-seed", str(i)])
            inputs = os.path.getsize(os.path.join(out, "inputs.json")) / 1024 / 1024
            vision.append(rss)
            print(f"  vision 10k unique {px}x{px} images run {i}: {rss:.1f} MB in {wall:.1f} s "
                  f"(inputs.json, every body: {inputs:.0f} MB)")
    median_line(f"memory: 10,000 requests with unique {px}x{px} images peak RSS", vision, "MB")


def main():
    global QUICK
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    if what == "quick":
        what, runs, QUICK = "everything", 1, 50
    benches = {"ceiling": ceiling, "fidelity": fidelity, "footprint": footprint,
               "walltime": walltime, "memory": memory}
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    for name, bench in benches.items():
        if what == name or what == "everything" or (what == "all" and name != "memory"):
            bench(runs)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
