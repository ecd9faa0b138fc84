#!/usr/bin/env python3
"""Startup to first request for the vision profile command.

Starts `aiperf mock-server --record-requests`, then runs the README's vision profile command
against it (builtin tokenizer) and measures, from the moment the `aiperf profile` process is
spawned, how long until the server received the first request (the server's own wall-clock
stamp). As a reference measured in the same run, it times the bare process start of
`aiperf --version`. Prints medians over the runs.

    cargo build --release && python3 bench/startup.py [runs]
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
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 5


def main():
    tmp = tempfile.mkdtemp()
    record = os.path.join(tmp, "server.jsonl")
    mock = subprocess.Popen(
        [BIN, "mock-server", "--port", "0", "--ttft", "20", "--itl", "5", "--record-requests", record],
        stdout=subprocess.PIPE,
        text=True,
    )
    url = mock.stdout.readline().split()[-1]
    startups, bare = [], []
    try:
        for i in range(RUNS):
            t0 = time.time_ns()
            subprocess.run([BIN, "--version"], check=True, stdout=subprocess.DEVNULL)
            bare.append((time.time_ns() - t0) / 1e6)

            mark = os.path.getsize(record) if os.path.exists(record) else 0
            cmd = [
                BIN, "profile", "--model", "Qwen/Qwen2-VL-2B-Instruct", "--endpoint-type", "chat",
                "--image-width-mean", "512", "--image-height-mean", "512",
                "--synthetic-input-tokens-mean", "100", "--output-tokens-mean", "100",
                "--streaming", "--url", url, "--request-count", "20", "--concurrency", "4",
                "--tokenizer", "builtin", "--random-seed", str(i),
                "--artifact-dir", os.path.join(tmp, f"run{i}"),
            ]
            t0 = time.time_ns()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wall = (time.time_ns() - t0) / 1e6
            time.sleep(0.3)  # let the server's recorder flush
            with open(record) as f:
                f.seek(mark)
                received = [json.loads(line)["received_ns"] for line in f if line.strip()]
            first = (min(received) - t0) / 1e6
            startups.append(first)
            print(f"run {i}: first request after {first:.1f} ms, whole command {wall:.0f} ms")
    finally:
        mock.terminate()
        mock.wait()
    print(f"startup to first request: median {statistics.median(startups):.1f} ms "
          f"(min {min(startups):.1f}, max {max(startups):.1f}) over {RUNS} runs")
    print(f"reference, bare process start (aiperf --version): median {statistics.median(bare):.1f} ms")


if __name__ == "__main__":
    main()
