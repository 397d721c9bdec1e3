#!/usr/bin/env bash
# make bench: idem verify side by side with what users would run instead.
#
#   bench/run.sh [IDEM]         COUNT=1000000 by default (COUNT=100000 for a quick look)
#
# Prints envelopes/s for `idem verify` (all cores, and one worker), a
# straightforward Python hmac script doing the same checks, and the raw
# HMAC-SHA256 rate of `openssl speed` for 1 KB messages, then the ratios.
# Every verifier's count of invalid deliveries is checked against the
# generator's ground truth. Figures are from one run on a shared machine:
# read the ratios, not the absolute numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
IDEM=${1:-build/idem}
COUNT=${COUNT:-1000000}
OUT=bench/out
mkdir -p "$OUT"
corpus="$OUT/deliveries-$COUNT.ndjson"
truth="$OUT/deliveries-$COUNT.truth.json"

if [ ! -s "$corpus" ] || [ ! -s "$truth" ]; then
    echo "generating $COUNT signed deliveries into $corpus ..."
    python3 bench/gen_deliveries.py --count "$COUNT" "$corpus" > "$truth"
fi
secret=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret"])' "$truth")
expected_invalid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["invalid"])' "$truth")
bytes=$(stat -c %s "$corpus")
cat "$corpus" > /dev/null # warm the page cache, as every contender gets

# seconds and peak RSS (KiB) of a command, stdout discarded, stderr kept in $OUT/last.err
measure() {
    local timing
    timing=$( { /usr/bin/time -f '%e %M' "$@" > /dev/null 2> "$OUT/last.err"; } 2>&1 ) || true
    # /usr/bin/time writes its line last on stderr
    timing=$(tail -n 1 "$OUT/last.err")
    echo "$timing"
}

run_idem() {
    local result
    result=$(measure "$IDEM" verify --scheme stripe --secret "$secret" --summary json "$@" "$corpus")
    local invalid
    invalid=$(grep '^{' "$OUT/last.err" | python3 -c 'import json,sys; print(json.load(sys.stdin)["invalid"])')
    echo "$result $invalid"
}

echo "corpus: $COUNT envelopes, $((bytes / 1024 / 1024)) MiB, $expected_invalid invalid (ground truth)"
read -r idem_s idem_rss idem_invalid < <(run_idem)
read -r idem1_s idem1_rss idem1_invalid < <(run_idem --threads 1)
py_result=$(measure sh -c "python3 bench/verify_stripe.py '$secret' < '$corpus'")
read -r py_s py_rss <<< "$py_result"
py_invalid=$(grep '^invalid:' "$OUT/last.err" | awk '{print $2}')
openssl_kbs=$(openssl speed -seconds 3 -bytes 1024 -hmac sha256 2>/dev/null | awk '/^hmac\(sha256\)/ {print $2}' | tr -d k)

. bench/floor.sh
FLOOR_KEYS=headers,body floor_fraction "idem verify" "$corpus" "$(nproc)" -- "$IDEM" verify --scheme stripe --secret "$secret" -q "$corpus"

python3 - "$COUNT" "$idem_s" "$idem_rss" "$idem1_s" "$idem1_rss" "$py_s" "$py_rss" "$openssl_kbs" \
    "$expected_invalid" "$idem_invalid" "$idem1_invalid" "$py_invalid" <<'PY'
import sys
count = int(sys.argv[1])
idem_s, idem_rss, idem1_s, idem1_rss, py_s, py_rss = map(float, sys.argv[2:8])
raw = float(sys.argv[8]) * 1000 / 1024  # 1 KB messages per second
expected, idem_invalid, idem1_invalid, py_invalid = sys.argv[9:13]
rate = lambda s: count / s
rows = [
    ("idem verify (all cores)", idem_s, idem_rss, idem_invalid),
    ("idem verify --threads 1", idem1_s, idem1_rss, idem1_invalid),
    ("python3 hmac script", py_s, py_rss, py_invalid),
]
print(f"{'contender':26} {'seconds':>8} {'envelopes/s':>12} {'peak RSS':>10} {'invalid':>8}")
for name, seconds, rss, invalid in rows:
    print(f"{name:26} {seconds:8.2f} {rate(seconds):12,.0f} {rss/1024:8.0f} MiB {invalid:>8}")
print(f"{'openssl speed hmac(sha256)':26} {'':8} {raw:12,.0f}   (1 KB messages, one core)")
print()
print(f"idem / python:         {rate(idem_s) / rate(py_s):5.1f}x   (target >= 8x)")
print(f"idem / raw HMAC rate:  {rate(idem_s) / raw:5.2f}    (target >= 0.5)")
print(f"idem one worker / raw: {rate(idem1_s) / raw:5.2f}")
ok = idem_invalid == expected == idem1_invalid == py_invalid
print("verdicts match the ground truth" if ok else f"MISMATCH: expected {expected} invalid")
sys.exit(0 if ok else 1)
PY
