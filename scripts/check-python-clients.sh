#!/usr/bin/env bash
# Runs the official `openai`, `ollama` and `anthropic` Python clients against a real Coordinator
# (`coordinator serve`) in front of the in-repo fake LLM server. Builds both binaries,
# installs the clients into .venv, and cleans up after itself.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL="qwen2.5:7b"
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# fake-llm needs the `testkit` feature. The binaries `cargo test` builds for the integration
# tests (with the features the tests turn on) are these two: after `cargo test` (as in
# .ci/run) this builds nothing, where `cargo build --features testkit` would build the
# dependency graph again with another set of features.
cargo test --quiet --no-run --test it

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install --quiet --disable-pip-version-check "openai>=1.40" "ollama>=0.4"
.venv/bin/pip install --quiet --disable-pip-version-check "anthropic>=0.40"

# Waits until a log file has a line matching $2, then prints the text after $3.
wait_for() {
    local file=$1 pattern=$2 after=$3
    for _ in $(seq 1 300); do
        if grep -q "$pattern" "$file" 2>/dev/null; then
            grep -m1 "$pattern" "$file" | sed -e "s/.*$after//" -e 's/ .*//'
            return 0
        fi
        sleep 0.1
    done
    echo "timed out waiting for '$pattern' in $file" >&2
    cat "$file" >&2
    return 1
}

./target/debug/fake-llm --listen 127.0.0.1:0 --model "$MODEL" --model nomic-embed-text --tools-model llama3.1:8b >"$work/fake.log" 2>&1 &
pids+=($!)
fake=$(wait_for "$work/fake.log" "listening on" "listening on ")

# Memory off: this checks the wire formats, and the same prompt is sent several times
# (with memory on, later answers would rightly recall the earlier ones).
COORDINATOR_MEMORY__ENABLED=false \
COORDINATOR_STORE__PATH="$work/coordinator.db" \
COORDINATOR_BACKENDS__0__NAME=moon \
COORDINATOR_BACKENDS__0__KIND=ollama \
COORDINATOR_BACKENDS__0__URL="$fake" \
    ./target/debug/coordinator serve --listen 127.0.0.1:0 >"$work/serve.log" 2>&1 &
pids+=($!)
addr=$(wait_for "$work/serve.log" "coordinator listening" "addr=")

.venv/bin/python tests/python/check_clients.py "http://$addr" "$MODEL"
