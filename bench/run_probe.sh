#!/usr/bin/env bash
# idem probe against the correct reference handler (samples/handlers/):
# how long the whole default plan takes, the full plan (signed, a fault,
# the handler's clock set by probe), and probe's own cost per request
# (its processor time over the requests it sent) beside curl sending the
# same number of deliveries one after another.
#
#   bench/run_probe.sh [IDEM]      REPEAT=3
set -euo pipefail
cd "$(dirname "$0")/.."
IDEM=${1:-build/idem}
REPEAT=${REPEAT:-3}
OUT=bench/out
mkdir -p "$OUT"
WORK=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$WORK"' EXIT
start() { # name, flags: the handler's URL on stdout
    local name=$1
    shift
    python3 samples/handlers/correct.py --db "$WORK/$name.db" "$@" > "$WORK/$name.out" 2>&1 &
    pids+=($!)
    for _ in $(seq 50); do grep -q listening "$WORK/$name.out" 2>/dev/null && break; sleep 0.1; done
}
start plain
start signed --secret whsec_bench --trust-clock-header X-Idem-Now
url=$(sed -n 's/listening on \(http[^ ]*\).*/\1/p' "$WORK/plain.out")
signed_url=$(sed -n 's/listening on \(http[^ ]*\).*/\1/p' "$WORK/signed.out")
query='SELECT count(*) FROM effects WHERE key = :key'
median() { sort -n | sed -n "$(( (REPEAT + 1) / 2 ))p"; }
timed() { # name, then the command: wall and cpu seconds, medians
    local name=$1
    shift
    for _ in $(seq "$REPEAT"); do
        /usr/bin/time -f '%e %U %S' -o "$WORK/time" "$@" > "$WORK/out" 2> /dev/null || true
        tail -n 1 "$WORK/time" # after "Command exited with non-zero status" when there is one
    done > "$WORK/times"
    wall=$(awk '{print $1}' "$WORK/times" | median)
    cpu=$(awk '{printf "%.3f\n", $2 + $3}' "$WORK/times" | median)
    printf '%s\t%s\t%s\n' "$name" "$wall" "$cpu"
}
printf 'run\twall s\tcpu s\n'
timed "default plan (statuses only)" "$IDEM" probe -q --to "$url" --report json
timed "default plan, side effects read" "$IDEM" probe -q --to "$url" --report json \
    --effects-sqlite "$WORK/plain.db" --effects-query "$query"
timed "full plan (signed, fault, clock)" "$IDEM" probe -q --to "$signed_url" --report json \
    --scheme stripe --secret whsec_bench --fail-first 'X-Inject-Fault: 1' --schedule fixed:1s \
    --clock-header X-Idem-Now --speed 3600 --effects-sqlite "$WORK/signed.db" --effects-query "$query"
requests=$("$IDEM" probe -q --to "$url" --report json | python3 -c 'import json, sys; print(json.load(sys.stdin)["requests"])')
timed "curl, $requests deliveries one by one" sh -c "for i in \$(seq $requests); do
    curl -s -o /dev/null -X POST -H 'Content-Type: application/json' -H \"Idempotency-Key: curl-\$\$-\$i\" \
      --data '{\"id\":\"evt_curl\"}' '$url'; done"
probe_cpu=$(awk -F '\t' 'NR == 2 {print $3}' <(
    printf 'run\twall s\tcpu s\n'
    timed "default" "$IDEM" probe -q --to "$url" --report json))
printf 'probe cpu per request: %s ms (%s requests)\n' \
    "$(python3 -c "print(round($probe_cpu * 1000 / $requests, 2))")" "$requests"
