#!/usr/bin/env bash
# The end-to-end benchmark of Coordinator's overhead (see docs/BENCHMARKS.md).
#
# Starts the in-repo fake LLM server (32 tokens per answer) and Coordinator as a user runs
# it (release build, embedded mode, SQLite task store), then drives both with oha
# (keep-alive) on POST /v1/chat/completions, non-streaming and streaming, at several
# concurrencies: direct to the fake, through a do-nothing pass-through on the same HTTP
# stack (bench-proxy: the floor under any proxy's overhead), and through Coordinator.
# Streaming runs also go through bench-client for the time to first token (directly,
# through the floor and through Coordinator). Prints a
# markdown table with the differences (Coordinator's overhead, the floor's) and
# Coordinator's peak RSS (VmHWM), and checks that every task was persisted. Loopback
# only; every run is bounded in time.
#
# Usage: scripts/bench.sh            (env: BENCH_DURATION=10s BENCH_CONCURRENCY="1 16 64"
#                                      BENCH_TTFT_S=5 BENCH_MODES="nonstream stream"
#                                      BENCH_OUT=file.md BENCH_BIN=dir RUST_LOG=...)
#                                     (BENCH_SYNCHRONOUS=full: the store's [store] synchronous)
#        scripts/bench.sh profile    (perf profile of Coordinator under non-streaming c=64 load;
#                                      env: BENCH_PROFILE_C=64 BENCH_PROFILE_MODE=nonstream)
#        scripts/bench.sh instructions (instructions per non-streaming request at c=1, counted
#                                      by callgrind; env: BENCH_CALLGRIND_N=2000
#                                      BENCH_CALLGRIND_C=1 for another concurrency,
#                                      BENCH_CALLGRIND_MODE=stream for streamed answers)
#        (BENCH_LIMITS=0 leaves [limits] out of the config: for builds older than the
#         per-client limits, which refuse it)
#        scripts/bench.sh bigstore   (the same table on a copy of a store like a household's after
#                                      years: 1,000,000 tasks, 100,000 memory items, seeded once
#                                      into target/bigstore/ by bench-seed; BENCH_BIGSTORE=1 does
#                                      the same for `instructions` and `profile`; env:
#                                      BENCH_SEED=1 BENCH_BIGSTORE_TASKS=1000000
#                                      BENCH_BIGSTORE_MEMORIES=100000)
#        scripts/bench.sh household  (several people on three simulated home machines: random,
#                                      round-robin, least-busy and Coordinator in one table,
#                                      about a minute; env: BENCH_SEED=1 BENCH_SCALE=10
#                                      BENCH_PEOPLE=4 BENCH_OUT=file.md
#                                      BENCH_ROWS=least-busy,coordinator (only those rows)
#                                      BENCH_TURNS=1 (every user turn of every row))
set -euo pipefail

OHA_VERSION="1.16.0"
DURATION="${BENCH_DURATION:-10s}"
CONCURRENCY="${BENCH_CONCURRENCY:-1 16 64}"
TTFT_S="${BENCH_TTFT_S:-5}"
MODES="${BENCH_MODES:-nonstream stream}"
MODEL="qwen2.5:7b"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# BENCH_BIN=dir: use the binaries already in dir (to compare builds of two commits).
BIN="${BENCH_BIN:-$ROOT/target/release}"

log() { printf '[bench] %s\n' "$*" >&2; }

# The commit the coordinator binary was built from (`coordinator --version`, see build.rs),
# so that a report names the binary it measured, not the checkout.
binary_commit() {
  local named
  named="$("$BIN/coordinator" --version 2>/dev/null | sed -nE 's/.*\(commit ([^)]+)\).*/\1/p')"
  echo "binary of commit ${named:-unknown (built before build.rs named it)}"
}

# `household` needs neither oha nor the servers below: one binary runs the machines, the
# people and Coordinator in one process.
if [[ "${1:-}" == household ]]; then
  if [[ -z "${BENCH_BIN:-}" ]]; then
    log "building bench-household (release, testkit)"
    (cd "$ROOT" && cargo build --release --quiet --features testkit --bin bench-household)
  fi
  ARGS=(--seed "${BENCH_SEED:-1}" --scale "${BENCH_SCALE:-10}" --people "${BENCH_PEOPLE:-4}")
  if [[ -n "${BENCH_OUT:-}" ]]; then
    # Relative to where the script was started, not to the checkout it runs in.
    [[ "$BENCH_OUT" == /* ]] || BENCH_OUT="$PWD/$BENCH_OUT"
    ARGS+=(--out "$BENCH_OUT")
  fi
  if [[ -n "${BENCH_ROWS:-}" ]]; then ARGS+=(--rows "$BENCH_ROWS"); fi
  if [[ -n "${BENCH_TURNS:-}" ]]; then ARGS+=(--turns); fi
  cd "$ROOT" && exec "$BIN/bench-household" "${ARGS[@]}"
fi

# `bigstore`: the default table (or the mode named after it) on the big store.
BIGSTORE="${BENCH_BIGSTORE:-0}"
if [[ "${1:-}" == bigstore ]]; then
  BIGSTORE=1
  shift
fi

ensure_tools() {
  if ! command -v oha >/dev/null 2>&1; then
    log "installing oha $OHA_VERSION from crates.io (cargo install, a few minutes)"
    cargo install oha --locked --version "$OHA_VERSION"
  fi
  local have
  have="$(oha --version | awk '{print $2}')"
  [[ "$have" == "$OHA_VERSION" ]] || log "note: oha $have found; the reference runs used $OHA_VERSION"
  if ! command -v jq >/dev/null 2>&1; then
    log "jq is needed to read oha's JSON: apt-get install -y jq"
    exit 1
  fi
}

# Prints the first line of FILE matching REGEX (sed -E capture 1), waiting up to a minute.
wait_for_line() {
  local file="$1" regex="$2" pid="$3" line
  for _ in $(seq 6000); do
    line="$(sed -E 's/\x1b\[[0-9;]*m//g' "$file" | sed -nE "s/$regex/\\1/p" | head -n1)"
    if [[ -n "$line" ]]; then
      echo "$line"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { log "process $pid died; its log:"; cat "$file" >&2; exit 1; }
    sleep 0.01
  done
  log "timed out waiting for /$regex/ in $file"
  exit 1
}

cleanup() {
  for pid in ${COORD_PID:-} ${RECORD_PID:-} ${PROXY_PID:-} ${FAKE_PID:-}; do
    kill "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
}
trap cleanup EXIT

ensure_tools
if [[ -z "${BENCH_BIN:-}" ]]; then
  log "building release binaries"
  # Two builds: fake-llm needs the `testkit` feature, and coordinator is benched as a
  # user builds it, without the fakes.
  (cd "$ROOT" && cargo build --release --quiet --bin coordinator --bin bench-client --bin bench-proxy \
    && cargo build --release --quiet --features testkit --bin fake-llm --bin bench-seed)
fi

WORK="$(mktemp -d -t coordinator-bench.XXXXXX)"
log "working directory: $WORK"

"$BIN/fake-llm" --listen 127.0.0.1:0 --tokens 32 --model "$MODEL" >"$WORK/fake.log" 2>&1 &
FAKE_PID=$!
FAKE_ADDR="$(wait_for_line "$WORK/fake.log" '^fake-llm listening on http:\/\/([0-9.:]+).*' "$FAKE_PID")"

# The floor: a pass-through on the same HTTP stack that does nothing else.
"$BIN/bench-proxy" --listen 127.0.0.1:0 --upstream "http://$FAKE_ADDR" >"$WORK/proxy.log" 2>&1 &
PROXY_PID=$!
PROXY_ADDR="$(wait_for_line "$WORK/proxy.log" '^bench-proxy listening on http:\/\/([0-9.:]+).*' "$PROXY_PID")"

# The recording floor: the same pass-through that also keeps a durable task row per
# request through Coordinator's own SQLite store (`--record`).
"$BIN/bench-proxy" --listen 127.0.0.1:0 --upstream "http://$FAKE_ADDR" --record "$WORK/floor.db" >"$WORK/record.log" 2>&1 &
RECORD_PID=$!
RECORD_ADDR="$(wait_for_line "$WORK/record.log" '^bench-proxy listening on http:\/\/([0-9.:]+).*' "$RECORD_PID")"

cat >"$WORK/coordinator.toml" <<EOF
[server]
listen = "127.0.0.1:0"

[store]
type = "sqlite"
path = "$WORK/coordinator.db"
${BENCH_SYNCHRONOUS:+synchronous = \"$BENCH_SYNCHRONOUS\"}

[[backends]]
name = "bench"
kind = "openai"
url = "http://$FAKE_ADDR/v1"
models = ["$MODEL"]
parallel = 64

EOF
if [[ "${BENCH_LIMITS:-1}" != 0 ]]; then
  # One client sends thousands of requests a second: a rate no person needs, set so high
  # that it never refuses while its check still runs on every request.
  cat >>"$WORK/coordinator.toml" <<EOF

[limits]
requests_per_minute = 1000000000
burst = 10000000
EOF
fi

# `instructions` runs Coordinator under callgrind, which counts instructions instead of
# timing them: the same count for the same binary and requests whatever else the machine
# does, so two builds compare on a noisy machine.
LAUNCH=()
if [[ "${1:-}" == instructions ]]; then
  command -v valgrind >/dev/null 2>&1 || { log "valgrind is needed: apt-get install -y valgrind"; exit 1; }
  LAUNCH=(valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.out")
fi

if [[ "$BIGSTORE" == 1 ]]; then
  tasks="${BENCH_BIGSTORE_TASKS:-1000000}" memories="${BENCH_BIGSTORE_MEMORIES:-100000}"
  SEEDED="$ROOT/target/bigstore/seed-${BENCH_SEED:-1}-$tasks-$memories.db"
  if [[ ! -f "$SEEDED" ]]; then
    log "seeding $SEEDED (once; minutes)"
    mkdir -p "$(dirname "$SEEDED")"
    rm -f "$SEEDED.part"*
    "$BIN/bench-seed" --path "$SEEDED.part" --tasks "$tasks" --memories "$memories" --seed "${BENCH_SEED:-1}" >&2
    mv "$SEEDED.part" "$SEEDED"
  fi
  cp "$SEEDED" "$WORK/coordinator.db"
  log "the store: a copy of $SEEDED ($(du -m "$WORK/coordinator.db" | cut -f1) MiB)"
fi

# Starts Coordinator; sets COORD_PID, COORD_ADDR and STARTUP_MS (from the process's start
# until it has answered GET /healthz).
start_coordinator() {
  local t0
  t0="$(date +%s%N)"
  (cd "$WORK" && NO_COLOR=1 exec "${LAUNCH[@]}" "$BIN/coordinator" serve --config "$WORK/coordinator.toml") \
    >"$WORK/coordinator.log" 2>&1 &
  COORD_PID=$!
  COORD_ADDR="$(wait_for_line "$WORK/coordinator.log" '.*coordinator listening.*addr=([0-9.:]+).*' "$COORD_PID")"
  curl -sf -o /dev/null "http://$COORD_ADDR/healthz"
  STARTUP_MS=$((($(date +%s%N) - t0) / 1000000))
}

# A first start applies any migration the store lacks (once in its life) and brings the
# file into the page cache; the second is the start-up a restart costs.
FIRST_START_MS="-"
if [[ -z "${LAUNCH[*]}" ]]; then
  start_coordinator
  FIRST_START_MS="$STARTUP_MS"
  kill -TERM "$COORD_PID"
  wait "$COORD_PID" 2>/dev/null || true
fi
start_coordinator
log "fake-llm on $FAKE_ADDR (pid $FAKE_PID), coordinator on $COORD_ADDR (pid $COORD_PID)"

body() {
  printf '{"model":"%s","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write a haiku about routing requests across a home cluster."}],"stream":%s}' "$MODEL" "$1"
}
body false >"$WORK/body-nonstream.json"
body true >"$WORK/body-stream.json"

hwm_kb() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }
# CPU time (user + system) a process has used, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# The same, for the threads of process $1 named $2 (`comm`).
thread_ticks() {
  local t sum=0
  for t in /proc/"$1"/task/*; do
    [[ "$(cat "$t/comm" 2>/dev/null)" == "$2" ]] && sum=$((sum + $(awk '{print $14 + $15}' "$t/stat")))
  done
  echo "$sum"
}
CLK_TCK="$(getconf CLK_TCK)"
load1() { cut -d' ' -f1 /proc/loadavg; }

# run_oha ADDR BODYFILE CONCURRENCY OUT.json
run_oha() {
  oha --no-tui --output-format json -z "$DURATION" -c "$3" -m POST \
    -H 'content-type: application/json' -D "$2" "http://$1/v1/chat/completions" >"$4"
}

# Fields of one measurement, tab-separated: rps p50_ms p99_ms ok errors
oha_fields() {
  jq -r '[
      .summary.requestsPerSec,
      .latencyPercentiles.p50 * 1000,
      .latencyPercentiles.p99 * 1000,
      (.statusCodeDistribution["200"] // 0),
      (((.errorDistribution // {}) | to_entries | map(select(.key | test("deadline") | not)) | map(.value) | add) // 0)
        + ((.statusCodeDistribution // {}) | to_entries | map(select(.key != "200")) | map(.value) | add // 0)
    ] | @tsv' "$1"
}

if [[ "${1:-}" == instructions ]]; then
  n="${BENCH_CALLGRIND_N:-2000}" c="${BENCH_CALLGRIND_C:-1}" mode="${BENCH_CALLGRIND_MODE:-nonstream}"
  oha --no-tui --output-format json -n 200 -c 1 -m POST -H 'content-type: application/json' \
    -D "$WORK/body-$mode.json" "http://$COORD_ADDR/v1/chat/completions" >/dev/null
  # Counted from here: start-up and warm-up left out.
  callgrind_control --zero "$COORD_PID" >/dev/null 2>&1
  oha --no-tui --output-format json -n "$n" -c "$c" -m POST -H 'content-type: application/json' \
    -D "$WORK/body-$mode.json" "http://$COORD_ADDR/v1/chat/completions" >"$WORK/oha-instructions.json"
  ok="$(jq -r '.statusCodeDistribution["200"] // 0' "$WORK/oha-instructions.json")"
  sleep 1
  kill -INT "$COORD_PID"
  wait "$COORD_PID" 2>/dev/null || true
  COORD_PID=""
  COMMIT="$(binary_commit)"
  echo "Instructions per $([[ "$mode" == stream ]] && echo streamed || echo non-streaming) request at c=$c (callgrind, $ok requests answered 200 of $n, $COMMIT):"
  echo
  echo "| part | instructions per request |"
  echo "|---|---|"
  callgrind_annotate --inclusive=yes "$WORK/callgrind.out" 2>/dev/null | awk -v n="$ok" '
    function take(key) { if (!(key in v)) { gsub(",", "", $1); v[key] = $1 } }
    /PROGRAM TOTALS/ { take("all") }
    /service::AppState::record_and_start::\{\{closure\}\}( \[|$)/ { take("turn") }
    /routing::Decider::decide(_user)?::\{\{closure\}\}( \[|$)/ { take("routing") }
    /memory::context::context_block( \[|$)/ { take("context") }
    /memory::embed::HashEmbedder::embed( \[|$)/ { take("embed") }
    /Worker>::(execute|settle)::\{\{closure\}\}( \[|$)/ { take("job") }
    /sqlite::writer::apply( \[|$)/ { take("writer") }
    END {
      split("all routing turn context job embed writer", order, " ")
      label["all"] = "all of Coordinator (every thread)"
      label["turn"] = "the turn: memory recall, composing, recording (request task)"
      label["routing"] = "routing the turn (before it)"
      label["context"] = "&nbsp;&nbsp;of which the memory context block"
      label["job"] = "the job: backend call, outcome, memory write (worker task)"
      label["embed"] = "the built-in embedder (recall and remembering, both above)"
      label["writer"] = "the SQLite writer thread'"'"'s statements and commits"
      for (i = 1; i <= 7; i++) if (order[i] in v) printf "| %s | %d |\n", label[order[i]], v[order[i]] / n
    }'
  log "full counts: callgrind_annotate --inclusive=yes $WORK/callgrind.out"
  exit 0
fi

if [[ "${1:-}" == profile ]]; then
  c="${BENCH_PROFILE_C:-64}" mode="${BENCH_PROFILE_MODE:-nonstream}"
  command -v perf >/dev/null 2>&1 || { log "perf is needed: apt-get install -y linux-perf"; exit 1; }
  oha --no-tui --output-format json -n 500 -c "$c" -m POST -H 'content-type: application/json' \
    -D "$WORK/body-$mode.json" "http://$COORD_ADDR/v1/chat/completions" >/dev/null
  log "profiling $mode c=$c for $DURATION (load $(load1))"
  run_oha "$COORD_ADDR" "$WORK/body-$mode.json" "$c" "$WORK/oha-profile.json" &
  OHA_PID=$!
  sleep 1
  perf record -F 499 --call-graph dwarf,32768 -o "$WORK/perf.data" -p "$COORD_PID" -- sleep 5 2>"$WORK/perf-record.log"
  wait "$OHA_PID"
  log "$(oha_fields "$WORK/oha-profile.json" | awk -F'\t' '{printf "%.0f req/s, p50 %.3f ms, p99 %.3f ms", $1, $2, $3}') under the profiler"
  perf report -i "$WORK/perf.data" --no-children --sort dso,symbol --percent-limit 0.7 --stdio 2>/dev/null \
    | grep -v '^$' | grep -E '^ +[0-9]' | head -60
  log "full profile: perf report -i $WORK/perf.data"
  exit 0
fi

RESULTS="$WORK/results.tsv"
: >"$RESULTS"
COORD_OK=0
for mode in $MODES; do
  for c in $CONCURRENCY; do
    for target in direct floor record coordinator; do
      case "$target" in
        direct) addr="$FAKE_ADDR" ;;
        floor) addr="$PROXY_ADDR" ;;
        record) addr="$RECORD_ADDR" ;;
        coordinator) addr="$COORD_ADDR" ;;
      esac
      # Warm-up: connections, caches, the first SQLite pages.
      oha --no-tui --output-format json -n 200 -c "$c" -m POST -H 'content-type: application/json' \
        -D "$WORK/body-$mode.json" "http://$addr/v1/chat/completions" >/dev/null
      load="$(load1)"
      out="$WORK/oha-$mode-$c-$target.json"
      # The CPU time of the server under test (the floor's or Coordinator's) and of
      # Coordinator's SQLite writer thread.
      server_pid="$COORD_PID"
      [[ "$target" == floor ]] && server_pid="$PROXY_PID"
      [[ "$target" == record ]] && server_pid="$RECORD_PID"
      cpu_before="$(cpu_ticks "$server_pid")" writer_before="$(thread_ticks "$COORD_PID" sqlite-writer)"
      run_oha "$addr" "$WORK/body-$mode.json" "$c" "$out"
      cpu_after="$(cpu_ticks "$server_pid")" writer_after="$(thread_ticks "$COORD_PID" sqlite-writer)"
      IFS=$'\t' read -r rps p50 p99 ok errors < <(oha_fields "$out")
      # CPU time per answered request (the server's share of the two cores); for
      # Coordinator, "total/writer".
      cpu_us="-"
      if [[ "$target" != direct && "$ok" -gt 0 ]]; then
        cpu_us="$(( (cpu_after - cpu_before) * 1000000 / CLK_TCK / ok ))"
        if [[ "$target" == coordinator ]]; then
          cpu_us="$cpu_us/$(( (writer_after - writer_before) * 1000000 / CLK_TCK / ok ))"
        fi
      fi
      ttft50="-" ttft99="-"
      if [[ "$mode" == stream ]]; then
        "$BIN/bench-client" --url "http://$addr/v1/chat/completions" --body "$WORK/body-stream.json" \
          -c "$c" --duration-s "$TTFT_S" >"$WORK/ttft-$c-$target.json"
        ttft50="$(jq -r .ttft_p50_ms "$WORK/ttft-$c-$target.json")"
        ttft99="$(jq -r .ttft_p99_ms "$WORK/ttft-$c-$target.json")"
        [[ "$target" == coordinator ]] && COORD_OK=$((COORD_OK + $(jq -r '.requests - .errors' "$WORK/ttft-$c-$target.json")))
      fi
      [[ "$target" == coordinator ]] && COORD_OK=$((COORD_OK + ok))
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$c" "$target" "$rps" "$p50" "$p99" \
        "$ttft50" "$ttft99" "$errors" "$load" "$(hwm_kb "$COORD_PID")" "$cpu_us" >>"$RESULTS"
      log "$mode c=$c $target: $(printf '%.0f' "$rps") req/s, p50 $(printf '%.3f' "$p50") ms, p99 $(printf '%.3f' "$p99") ms, ttft p50 $ttft50 ms, errors $errors, server CPU/request $cpu_us µs, load $load"
    done
  done
done

# What grows with the store besides the request path: `coordinator tasks list` (a process
# of its own, the median of five) and GET /tasks/{id} of a task from the middle of the
# store, while Coordinator runs.
list_ms() {
  local times=() t0
  for _ in 1 2 3 4 5; do
    t0="$(date +%s%N)"
    (cd "$WORK" && "$BIN/coordinator" tasks list --config "$WORK/coordinator.toml" "$@" >/dev/null 2>&1)
    times+=($((($(date +%s%N) - t0) / 1000000)))
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n 3p
}
LIST_ALL_MS="$(list_ms --limit 20)"
LIST_QUEUED_MS="$(list_ms --status queued --limit 20)"
LIST_PERSON_MS="$(list_ms --person default --limit 20)"
MIDDLE_ID="$(sqlite3 "$WORK/coordinator.db" "SELECT task_id FROM tasks ORDER BY created_at LIMIT 1 OFFSET (SELECT count(*) / 2 FROM tasks)" 2>/dev/null || true)"
GET_P50="-" GET_P99="-" GET_RPS="-"
if [[ -n "$MIDDLE_ID" ]]; then
  oha --no-tui --output-format json -z 5s -c 1 "http://$COORD_ADDR/tasks/$MIDDLE_ID" >"$WORK/oha-get.json"
  IFS=$'\t' read -r GET_RPS GET_P50 GET_P99 _ _ < <(oha_fields "$WORK/oha-get.json")
fi

HWM_KB="$(hwm_kb "$COORD_PID")"
# Let the tasks of requests cut off at a run's deadline finish, then count the rows.
sleep 1
kill -TERM "$COORD_PID"
wait "$COORD_PID" 2>/dev/null || true
COORD_PID=""
# The rows of a task store per status (`done=1234 running=2`); empty without sqlite3.
status_counts() {
  sqlite3 "$1" "SELECT status || '=' || count(*) FROM tasks GROUP BY status" 2>/dev/null | paste -sd' ' || true
}
TASKS="$(status_counts "$WORK/coordinator.db")"
FLOOR_TASKS="$(status_counts "$WORK/floor.db")"

COMMIT="$(binary_commit)"
{
  echo "Run: $(date -u '+%Y-%m-%d %H:%M UTC'), $COMMIT, $(nproc) cores, oha $(oha --version | awk '{print $2}'), -z $DURATION per cell, TTFT over ${TTFT_S}s (bench-client)"
  echo
  echo "| mode | c | direct req/s | floor req/s | coord req/s (of the floor's) | direct p50 / p99 ms | coord p50 / p99 ms | added p50 / p99 ms | bare proxy added p50 / p99 ms | TTFT direct / coord p50 ms | TTFT added p50 / p99 ms (floor) | CPU µs/req: floor, coord (its SQLite writer) | recording floor req/s, CPU µs/req (coord's share of its req/s) | errors | load (1 min) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  awk -F'\t' '
    function cpu(floor, coord,   w) {
      split(coord, w, "/")
      return sprintf("%s, %s (%s)", floor, w[1], w[2])
    }
    $3 == "direct" { d[$1,$2] = $0; next }
    $3 == "floor" { f[$1,$2] = $0; next }
    $3 == "record" { r[$1,$2] = $0; next }
    {
      split(d[$1,$2], x, "\t")
      split(f[$1,$2], y, "\t")
      split(r[$1,$2], z, "\t")
      rec = sprintf("%.0f, %s (%.2fx)", z[4], z[12], (z[4] > 0 ? $4 / z[4] : 0))
      ttft = "–"; tadd = "–"
      if ($1 == "stream") {
        ttft = sprintf("%.3f / %.3f", x[7], $7)
        tadd = sprintf("%+.3f / %+.3f (%+.3f / %+.3f)", $7 - x[7], $8 - x[8], y[7] - x[7], y[8] - x[8])
      }
      printf "| %s | %s | %.0f | %.0f | %.0f (%.2fx) | %.3f / %.3f | %.3f / %.3f | %+.3f / %+.3f | %+.3f / %+.3f | %s | %s | %s | %s | %d / %d | %s / %s |\n",
        ($1 == "stream" ? "stream" : "non-stream"), $2, x[4], y[4], $4, (y[4] > 0 ? $4 / y[4] : 0), x[5], x[6], $5, $6,
        $5 - x[5], $6 - x[6], y[5] - x[5], y[6] - x[6], ttft, tadd, cpu(y[12], $12), rec, x[9], $9, x[10], $10
    }' "$RESULTS"
  echo
  # Issue 22's targets, each against the floor measured in the same run.
  awk -F'\t' '
    $3 == "direct" { d[$1,$2] = $0; next }
    $3 == "floor" { f[$1,$2] = $0; next }
    $3 == "record" { next }
    { c[$1,$2] = $0 }
    function verdict(ok) { return ok ? "met" : "missed" }
    END {
      if (("nonstream", 64) in c) {
        split(c["nonstream", 64], k, "\t"); split(f["nonstream", 64], y, "\t")
        r = k[4] / y[4]
        printf "Target, non-stream c=64 throughput at least 0.8x the floor'"'"'s: %.2fx (%.0f / %.0f req/s), %s\n", r, k[4], y[4], verdict(r >= 0.8)
      }
      if (("nonstream", 1) in c) {
        split(c["nonstream", 1], k, "\t"); split(f["nonstream", 1], y, "\t"); split(d["nonstream", 1], x, "\t")
        o50 = (k[5] - x[5]) - (y[5] - x[5]); o99 = (k[6] - x[6]) - (y[6] - x[6])
        printf "Target, non-stream c=1 added p50 at most the floor'"'"'s + 0.1 ms: %+.3f ms over it, %s; added p99 at most the floor'"'"'s + 0.3 ms: %+.3f ms over it, %s\n", o50, verdict(o50 <= 0.1), o99, verdict(o99 <= 0.3)
      }
      for (n = 16; n <= 64; n *= 4) {
        if (!(("stream", n) in c)) continue
        split(c["stream", n], k, "\t"); split(f["stream", n], y, "\t"); split(d["stream", n], x, "\t")
        fa = y[7] - x[7]; ca = k[7] - x[7]
        if (fa > 0) printf "Target, stream c=%d TTFT added at most twice the floor'"'"'s: p50 %.2fx (%+.3f against %+.3f ms), %s\n", n, ca / fa, ca, fa, verdict(ca <= 2 * fa)
      }
    }' "$RESULTS"
  echo
  echo "Coordinator peak RSS (VmHWM): $((HWM_KB / 1024)) MiB ($HWM_KB kB); after each cell: $(awk -F'\t' '$3 == "coordinator" {printf "%s%d", (n++ ? ", " : ""), $11 / 1024}' "$RESULTS") MiB"
  echo "Tasks in the store: ${TASKS:-unknown (sqlite3 not installed)}; requests answered 200 through Coordinator (oha + bench-client, warm-ups not counted): $COORD_OK"
  echo "Rows in the recording floor's store: ${FLOOR_TASKS:-unknown}"
  echo "Store: $([[ "$BIGSTORE" == 1 ]] && echo "big ($(basename "$SEEDED"))" || echo empty), synchronous = ${BENCH_SYNCHRONOUS:-normal}; start-up until GET /healthz answers: $STARTUP_MS ms (first start, with migrations and a cold page cache: $FIRST_START_MS ms)"
  echo "coordinator tasks list (median of 5, whole process): --limit 20 $LIST_ALL_MS ms, --status queued $LIST_QUEUED_MS ms, --person default $LIST_PERSON_MS ms"
  echo "GET /tasks/{id} of the middle task, c=1 for 5 s: p50 $(printf '%.3f' "$GET_P50") ms, p99 $(printf '%.3f' "$GET_P99") ms, $(printf '%.0f' "$GET_RPS") req/s"
} | tee "$WORK/report.md"
if [[ -n "${BENCH_OUT:-}" ]]; then
  cp "$WORK/report.md" "$BENCH_OUT"
fi
log "raw results in $WORK"
