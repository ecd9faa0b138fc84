#!/usr/bin/env bash
# Every figure of bench/README.md in one command, each printed beside the reference measured
# in the same run (the three memory rounds alone take over 20 minutes on a loaded 2-core VM); the load average is printed
# first and last, since other processes on the machine make every figure worse.
#
#   bash bench/run_all.sh            # everything
#   bash bench/run_all.sh client     # only the client's CPU and memory (client_cpu, memory)
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
target="${CARGO_TARGET_DIR:-target}"

echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
cargo build --release --bin aiperf
export AIPERF_BIN="$target/release/aiperf"

# Client CPU per streamed request against a raw hyper client (same mock, same run).
cargo bench --bench client_cpu
# What the live dashboard costs: CPU per request and send lag against --ui-type none.
cargo bench --bench live_views
# Peak RSS of growing text runs (growth per request) and of 10,000 unique images.
python3 bench/client.py memory 3

if [ "$what" = all ]; then
    cargo bench --bench mock_throughput
    cargo bench --bench jsonl_format
    cargo bench --bench collector_record
    cargo bench --bench sweep_line
    cargo bench --bench dataset_build
    cargo bench --bench pacing
    cargo bench --bench timer_accuracy
    python3 bench/client.py all 3
    python3 bench/startup.py 5
fi
echo "== done, load average $(cut -d' ' -f1-3 /proc/loadavg)"
