#!/bin/sh
# The manifests `aiperf kube generate` writes, checked with checkov for several command
# lines: every check passes, or is skipped by an annotation the generator wrote with its
# reason (src/kube/pods.rs, accepted_checks). Any failed check fails CI.
#
#   .ci/kube_lint.sh BINARY CHECKOV
set -eu
bin=$1 checkov=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common="-m Qwen/Qwen2-VL-2B-Instruct --url http://vllm:8000 --tokenizer builtin --pvc results"
i=0
for args in \
    "--streaming --request-rate 200 --request-count 1000 --shards 4 --image reg.example/aiperf:0.1.0 --api-key sk-x" \
    "--concurrency 8 --benchmark-duration 60 --shards 2 --namespace bench --image reg.example/aiperf@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" \
    "--concurrency 8 --request-count 100 --shards 2 --secret my-keys --api-key x -H Authorization:Bearer_x" \
    "--concurrency 4 --request-count 40 --shards 1 --no-merge --job-name solo"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    HF_HUB_OFFLINE=1 "$bin" kube generate $common $args > "$work/plan$i.yaml" 2>/dev/null
    "$checkov" -f "$work/plan$i.yaml" --framework kubernetes --compact --quiet --skip-download \
        > "$work/plan$i.txt" 2>&1 || {
        cat "$work/plan$i.txt"
        echo "kube lint: checkov found failed checks in the manifests of: kube generate $args" >&2
        exit 1
    }
    grep -E 'Passed checks' "$work/plan$i.txt" | sed "s/^/plan $i: /"
done
