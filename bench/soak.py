#!/usr/bin/env python3
"""Soak: does a long or large run stay bounded? Each figure beside its reference from the same
run, against `aiperf mock-server --fast` and a Prometheus endpoint served here.

    cargo build --release
    python3 bench/soak.py requests [count]    # text runs of count/10 and count requests (default
                                              # 1,000,000) at c=512: peak RSS, growth per request
    python3 bench/soak.py scrape [minutes]    # a run of `minutes` (default 10) scraping a
                                              # 1,000-series vLLM-shaped /metrics 3 times a second,
                                              # and one of a fifth as long: peak RSS growth per
                                              # minute; client CPU per request against the same
                                              # load without scraping
    python3 bench/soak.py events [mb]         # one SSE event of `mb` MB (default 20): peak RSS
                                              # against the same stream in 1 KB events
    python3 bench/soak.py metrics-server PORT SHAPE   # only serve /metrics (vllm | gauges:N)
    python3 bench/soak.py quick               # all three at a small size (CI)

Peak RSS is the kernel's ru_maxrss of the `aiperf profile` process (wait4); CPU its user+sys.
"""
import http.server
import json
import os
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("AIPERF_BIN") or os.path.join(
    os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"), "release", "aiperf")
TMP = tempfile.mkdtemp(prefix="aiperf-soak-")
MB = 1024 * 1024


def vllm_exposition(n, engines=6):
    """996 series for 6 engines: 8 histograms of 18 buckets and 6 gauges per engine, every
    value changing at every scrape (as a busy vLLM's do)."""
    out = []
    for h in range(8):
        name = f"vllm:histogram_{h}_seconds"
        out.append(f"# HELP {name} A histogram.\n# TYPE {name} histogram")
        for e in range(engines):
            lab = f'engine="{e}",model_name="m"'
            for b in range(17):
                out.append(f'{name}_bucket{{{lab},le="{0.001 * (1 << b)}"}} {n * (b + 1)}')
            out.append(f'{name}_bucket{{{lab},le="+Inf"}} {n * 20}')
            out.append(f"{name}_sum{{{lab}}} {n * 0.37}\n{name}_count{{{lab}}} {n * 20}")
    for g in range(6):
        name = f"vllm:gauge_{g}"
        out.append(f"# HELP {name} A gauge.\n# TYPE {name} gauge")
        for e in range(engines):
            out.append(f'{name}{{engine="{e}",model_name="m"}} {(n * 7 + e) / 3}')
    return "\n".join(out) + "\n"


def gauges_exposition(n, count):
    """`count` gauges, one label set each; one in a hundred changes at each scrape."""
    out = ["# HELP adapter_requests Requests per adapter.", "# TYPE adapter_requests gauge"]
    for i in range(count):
        v = i % 7 + (n if (i + n) % 100 == 0 else 0)
        out.append(f'adapter_requests{{adapter="lora-{i:05}"}} {v}')
    return "\n".join(out) + "\n"


class MetricsServer:
    """A threaded HTTP server whose /metrics is `shape` at its n-th scrape."""

    def __init__(self, shape, port=0):
        scrapes = [0]
        if shape == "vllm":
            make = vllm_exposition
        else:
            count = int(shape.split(":")[1])
            make = lambda n: gauges_exposition(n, count)  # noqa: E731

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                body = make(scrapes[0]).encode()
                scrapes[0] += 1
                self.send_response(200)
                self.send_header("content-type", "text/plain; version=0.0.4")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.scrapes = scrapes
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


class Mock:
    def __init__(self, *args):
        self.proc = subprocess.Popen([BIN, "mock-server", "--port", "0", *args],
                                     stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().split()[-1]

    def close(self):
        self.proc.terminate()
        self.proc.wait()


_runs = [0]


def profile(url, args, env=None):
    """Runs `aiperf profile`; returns (wall s, peak RSS MB, cpu s, summary JSON)."""
    _runs[0] += 1
    out = os.path.join(TMP, f"run{_runs[0]}")
    cmd = [BIN, "profile", "--url", url, "--model", "m", "--tokenizer", "builtin",
           "--ui", "none", "--artifact-dir", out, *args]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})})
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"aiperf profile failed: {' '.join(cmd)}\n{proc.stderr.read().decode()}")
    with open(os.path.join(out, "profile_export_aiperf.json")) as f:
        summary = json.load(f)
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, summary


TEXT = ["--endpoint-type", "chat", "--streaming", "--synthetic-input-tokens-mean", "10",
        "--output-tokens-mean", "16", "--extra-inputs", "ignore_eos:true"]


def requests(count):
    small = count // 10
    mock = Mock("--fast", "--workers", "1")
    try:
        peaks = {}
        for n in (small, count):
            wall, rss, cpu, _ = profile(mock.url, [*TEXT, "--concurrency", "512",
                                                   "--request-count", str(n),
                                                   "--no-server-metrics"])
            peaks[n] = rss
            print(f"  {n} text requests at c=512: peak RSS {rss:.1f} MB, {wall:.1f} s, "
                  f"cpu {cpu / n * 1e6:.1f} us/request")
        grow = (peaks[count] - peaks[small]) * MB / (count - small)
        print(f"requests: growth {grow:.0f} bytes per request from {small} to {count} "
              f"(reference: the {small}-request run's peak, {peaks[small]:.1f} MB)")
    finally:
        mock.close()


def scrape(minutes):
    seconds = max(10, int(minutes * 60))
    short = max(5, seconds // 5)
    metrics = MetricsServer("vllm")
    mock = Mock("--ttft", "20", "--itl", "5")
    load = [*TEXT, "--concurrency", "32", "--benchmark-grace-period", "0", "--no-gpu-telemetry"]
    try:
        runs = {}
        for secs, scraping in ((short, True), (seconds, True), (short, False)):
            flags = ["--server-metrics", metrics.url] if scraping else ["--no-server-metrics"]
            before = metrics.scrapes[0]
            wall, rss, cpu, s = profile(mock.url, [*load, "--benchmark-duration", str(secs), *flags])
            n = s["request_count"]["avg"]
            runs[(secs, scraping)] = (rss, cpu / n)
            print(f"  {secs} s, {'scraping' if scraping else 'no scraping'}: {n:.0f} requests, "
                  f"{metrics.scrapes[0] - before} scrapes, peak RSS {rss:.1f} MB, "
                  f"cpu {cpu / n * 1e6:.1f} us/request, wall {wall:.1f} s")
        grow = (runs[(seconds, True)][0] - runs[(short, True)][0]) / ((seconds - short) / 60)
        print(f"scrape: peak RSS growth {grow:+.2f} MB per minute of run "
              f"(1,000-series /metrics scraped 3 times a second)")
        ratio = runs[(short, True)][1] / runs[(short, False)][1]
        print(f"scrape: client CPU per request scraping / not scraping (same load, same run): "
              f"{ratio:.2f}")
    finally:
        metrics.close()
        mock.close()


def events(mb):
    """A server that streams one `mb`-MB SSE event (a long content string), then [DONE]."""
    size = int(mb * MB)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length", 0)))
            big = self.path.endswith("big")
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()

            def chunk(b):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))

            text = "x" * (size if big else 1024)
            count = 1 if big else size // 1024
            for _ in range(count):
                ev = json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]})
                data = ("data: " + ev + "\n\n").encode()
                for i in range(0, len(data), 65536):
                    chunk(data[i:i + 65536])
            chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        peaks = {}
        for kind in ("small", "big"):
            _, rss, _, _ = profile(f"{base}/{kind}", [
                "--endpoint-type", "chat", "--custom-endpoint", f"/{kind}", "--streaming",
                "--request-count", "1", "--concurrency", "1", "--no-server-metrics"])
            peaks[kind] = rss
        print(f"events: one {mb} MB SSE event: peak RSS {peaks['big']:.1f} MB; the same bytes "
              f"in 1 KB events: {peaks['small']:.1f} MB; {peaks['big'] - peaks['small']:+.1f} MB, "
              f"{(peaks['big'] - peaks['small']) / mb:.1f}x the event")
    finally:
        server.shutdown()


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "quick"
    arg = sys.argv[2] if len(sys.argv) > 2 else None
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    if what == "requests":
        requests(int(arg or 1_000_000))
    elif what == "scrape":
        scrape(float(arg or 10))
    elif what == "events":
        events(float(arg or 20))
    elif what == "metrics-server":
        server = MetricsServer(sys.argv[3] if len(sys.argv) > 3 else "vllm", int(arg))
        print(server.url, flush=True)
        threading.Event().wait()
    elif what == "quick":
        requests(20_000)
        scrape(1 / 6)
        events(1)
    else:
        sys.exit(__doc__)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
