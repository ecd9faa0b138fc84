#!/usr/bin/env python3
"""Wall time beyond traffic and peak RSS of the README's first command with a real tokenizer.

usage: bench/tokenizer_seed.py AIPERF_BINARY TOKENIZER_DIR [RUNS]

Runs `aiperf profile` (the README's vision command against the built-in mock server, with
`--tokenizer TOKENIZER_DIR`) under `/usr/bin/time -v` RUNS times (default 5): the first with
an empty tokenizer cache (`XDG_CACHE_HOME` in a temporary directory), the others reusing it.
"Beyond traffic" is the wall time minus the run's `benchmark_duration` (first request sent to
last response received), from `profile_export_aiperf.json`.
"""

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def run_once(binary, tokenizer, cache, out):
    args = [
        "/usr/bin/time", "-v", binary, "profile",
        "--model", "Qwen/Qwen2-VL-2B-Instruct", "--endpoint-type", "chat",
        "--tokenizer", tokenizer,
        "--image-width-mean", "512", "--image-height-mean", "512",
        "--synthetic-input-tokens-mean", "100", "--output-tokens-mean", "100",
        "--streaming", "--request-count", "20", "--concurrency", "4", "--mock-server",
        "--artifact-dir", out,
    ]
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "XDG_CACHE_HOME": cache}
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(done.stderr[-3000:])
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", done.stderr)
    hours, minutes, seconds = wall.groups()
    wall_s = int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds)
    peak_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    summary = json.loads((Path(out) / "profile_export_aiperf.json").read_text())
    traffic_s = summary["benchmark_duration"]["avg"]
    how = re.search(r"Using tokenizer: .*", done.stderr)
    return wall_s, traffic_s, peak_kb / 1024, how.group(0) if how else "?"


def main():
    binary, tokenizer = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    with tempfile.TemporaryDirectory() as cache:
        for i in range(runs):
            with tempfile.TemporaryDirectory() as out:
                wall, traffic, peak, how = run_once(binary, tokenizer, cache, out)
            print(f"run {i + 1}: wall {wall:.2f} s, traffic {traffic:.2f} s, "
                  f"beyond traffic {wall - traffic:.2f} s, peak RSS {peak:.0f} MB  [{how}]")


if __name__ == "__main__":
    main()
