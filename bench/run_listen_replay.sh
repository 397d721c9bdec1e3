#!/usr/bin/env bash
# idem listen under load, and idem replay side by side with what users do
# today (issue: listen and replay).
#
#   bench/run_listen_replay.sh [IDEM]     COUNT=100000 DURATION=10 by default
#
# 1. idem listen, capture on (to a file), loaded by wrk from a second process
#    on loopback: requests/s and p99.
# 2. idem replay of COUNT small events to idem listen with --concurrency 8
#    (SQLite ledger), against a curl loop (one process per event, CURL_COUNT
#    of them) and a Python requests.Session loop (PYTHON_COUNT of them), each
#    sending the Idempotency-Key. The capture is checked: every key exactly
#    once. One run on a shared machine: read the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
IDEM=${1:-build/idem}
COUNT=${COUNT:-100000}
DURATION=${DURATION:-12}
CURL_COUNT=${CURL_COUNT:-1000}
PYTHON_COUNT=${PYTHON_COUNT:-20000}
OUT=bench/out
mkdir -p "$OUT"
corpus="$OUT/replay-$COUNT.ndjson"
[ -s "$corpus" ] || python3 bench/gen_replay.py --count "$COUNT" "$corpus"

listener_pid=""
listener_port=""
start_listener() {
    rm -f "$1"
    "$IDEM" listen --port 0 -o "$1" --summary json 2> "$OUT/listen.err" &
    listener_pid=$!
    for _ in $(seq 100); do
        listener_port=$(head -1 "$OUT/listen.err" 2>/dev/null | sed -n 's/.*http:\/\/[^:]*:\([0-9]*\).*/\1/p')
        [ -n "$listener_port" ] && return
        sleep 0.05
    done
    echo "idem listen did not start" >&2
    exit 4
}
stop_listener() {
    kill -TERM "$listener_pid"
    wait "$listener_pid" || true
}
trap '[ -n "$listener_pid" ] && kill "$listener_pid" 2>/dev/null || true' EXIT

echo "== idem listen, capture on, wrk -t1 -c16 -d${DURATION}s on loopback"
start_listener "$OUT/listen-load.ndjson"
wrk -t1 -c16 -d"${DURATION}s" --latency -s bench/wrk_post.lua \
    "http://127.0.0.1:$listener_port/hooks/stripe" > "$OUT/wrk.txt"
stop_listener
listen_rps=$(awk '/^Requests\/sec/ {print $2}' "$OUT/wrk.txt")
listen_p99=$(awk '$1 == "99%" {print $2}' "$OUT/wrk.txt")
captured=$(wc -l < "$OUT/listen-load.ndjson")
answered=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["answered_2xx"])' "$OUT/listen.err")
check="captured $captured of $answered answered 2xx"
[ "$captured" -ge "$answered" ] || check="LOST: $check"
printf '  %s requests/s, p99 %s (%s)\n' "$listen_rps" "$listen_p99" "$check"
rm -f "$OUT/listen-load.ndjson"

# The same load beside hostile clients: IDLE connections held silent and
# DRIP slowloris heads (58 KiB each, a few bytes at a time). The normal
# sender's rate and p99 must hold, and the listener's CPU stays that of the
# normal load (a head parsed again on every read would cost seconds).
IDLE=${IDLE:-10000}
DRIP=${DRIP:-8}
echo "== idem listen beside $IDLE idle connections and $DRIP slowloris heads, wrk -t1 -c16 -d${DURATION}s"
listen_args_saved=("--header-timeout" "$((DURATION + 20))s")
rm -f "$OUT/listen-hostile.ndjson"
"$IDEM" listen --port 0 -o "$OUT/listen-hostile.ndjson" --summary json "${listen_args_saved[@]}" 2> "$OUT/listen.err" &
listener_pid=$!
listener_port=""
for _ in $(seq 100); do
    listener_port=$(head -1 "$OUT/listen.err" 2>/dev/null | sed -n 's/.*http:\/\/[^:]*:\([0-9]*\).*/\1/p')
    [ -n "$listener_port" ] && break
    sleep 0.05
done
python3 bench/hostile_clients.py "$listener_port" --idle "$IDLE" --drip "$DRIP" --seconds "$DURATION" \
    > "$OUT/hostile.txt" &
hostile_pid=$!
sleep 2 # the idle connections open, then the drips begin
# The drips alone for 3 s: what the listener spends on slowloris heads.
cpu_before=$(awk '{print $14 + $15}' "/proc/$listener_pid/stat")
sleep 3
cpu_after=$(awk '{print $14 + $15}' "/proc/$listener_pid/stat")
wrk -t1 -c16 -d"$((DURATION - 5))s" --latency -s bench/wrk_post.lua \
    "http://127.0.0.1:$listener_port/hooks/stripe" > "$OUT/wrk-hostile.txt"
wait "$hostile_pid"
stop_listener
hostile_rps=$(awk '/^Requests\/sec/ {print $2}' "$OUT/wrk-hostile.txt")
hostile_p99=$(awk '$1 == "99%" {print $2}' "$OUT/wrk-hostile.txt")
ticks=$(getconf CLK_TCK)
printf '  %s requests/s, p99 %s; the listener spent %.2f CPU-s on the drips alone over 3 s; %s\n' \
    "$hostile_rps" "$hostile_p99" \
    "$(awk -v a="$cpu_before" -v b="$cpu_after" -v t="$ticks" 'BEGIN { print (b - a) / t }')" \
    "$(cat "$OUT/hostile.txt")"
rm -f "$OUT/listen-hostile.ndjson"

# Latency percentiles and the per-key check of one contender's run.
summarize() {
    python3 - "$@" << 'PY'
import json, sys
from collections import Counter
name, seconds, count, capture, latencies = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
keys = Counter()
for line in open(capture, "rb"):
    headers = {k.lower(): v for k, v in json.loads(line)["headers"]}
    keys[headers.get("idempotency-key")] += 1
ok = "checked: every key once" if len(keys) == count and max(keys.values()) == 1 else \
     f"MISMATCH: {len(keys)} keys of {count}, most sent {max(keys.values())} times"
lat = sorted(float(x) for x in open(latencies)) if latencies != "-" else []
pct = lambda p: f"{lat[min(len(lat) - 1, int(len(lat) * p))]:.2f} ms" if lat else "-"
print(f"{name}\t{seconds:.2f}\t{count / seconds:.0f}\t{pct(0.5)}\t{pct(0.99)}\t{ok}")
PY
}
results="$OUT/replay-results.tsv"
: > "$results"

echo "== idem replay of $COUNT events, --concurrency 8, SQLite ledger"
start_listener "$OUT/replay-capture.ndjson"
rm -f "$OUT/replay-ledger.db"*
start=$(date +%s.%N)
"$IDEM" replay --to "http://127.0.0.1:$listener_port/hooks" --key id --concurrency 8 \
    --store "$OUT/replay-ledger.db" -q "$corpus" > "$OUT/replay-outcomes.ndjson"
seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
stop_listener
python3 -c 'import json,sys
for line in open(sys.argv[1]): print(json.loads(line)["latency_ms"])' "$OUT/replay-outcomes.ndjson" > "$OUT/replay-latency.txt"
summarize "idem replay (SQLite ledger)" "$seconds" "$COUNT" "$OUT/replay-capture.ndjson" "$OUT/replay-latency.txt" >> "$results"

echo "== a curl loop over the first $CURL_COUNT events"
head -n "$CURL_COUNT" "$corpus" > "$OUT/replay-curl.ndjson"
start_listener "$OUT/replay-curl-capture.ndjson"
start=$(date +%s.%N)
while IFS= read -r line; do
    key=${line#*\"id\":\"}
    key=${key%%\"*}
    curl -s -o /dev/null -w '%{time_total}\n' -H 'Content-Type: application/json' \
        -H "Idempotency-Key: $key" --data-binary "$line" "http://127.0.0.1:$listener_port/hooks"
done < "$OUT/replay-curl.ndjson" | awk '{print $1 * 1000}' > "$OUT/replay-curl-latency.txt"
seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
stop_listener
summarize "curl loop" "$seconds" "$CURL_COUNT" "$OUT/replay-curl-capture.ndjson" "$OUT/replay-curl-latency.txt" >> "$results"

if python3 -c 'import requests' 2> /dev/null; then
    echo "== a Python requests loop over the first $PYTHON_COUNT events"
    head -n "$PYTHON_COUNT" "$corpus" > "$OUT/replay-python.ndjson"
    start_listener "$OUT/replay-python-capture.ndjson"
    start=$(date +%s.%N)
    python3 bench/replay_python_requests.py "http://127.0.0.1:$listener_port/hooks" \
        "$OUT/replay-python.ndjson" "$OUT/replay-python-latency.txt" > /dev/null
    seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
    stop_listener
    summarize "Python requests loop" "$seconds" "$PYTHON_COUNT" "$OUT/replay-python-capture.ndjson" \
        "$OUT/replay-python-latency.txt" >> "$results"
else
    echo "(python3 has no requests module: its contender is skipped)"
fi

echo
python3 - "$results" << 'PY'
import sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
idem_rate = float(rows[0][2])
print(f"{'contender':30} {'seconds':>8} {'req/s':>8} {'p50':>9} {'p99':>9} {'idem is':>9}  output")
for name, seconds, rate, p50, p99, ok in rows:
    ratio = idem_rate / float(rate)
    print(f"{name:30} {float(seconds):8.2f} {float(rate):8.0f} {p50:>9} {p99:>9} {ratio:8.1f}x  {ok}")
PY
rm -f "$OUT"/replay-*capture.ndjson "$OUT/replay-ledger.db"*
