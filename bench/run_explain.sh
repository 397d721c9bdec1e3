#!/usr/bin/env bash
# What verify --explain costs (issue: forensics): nothing measurable on
# valid deliveries (it runs on invalid ones only), and on invalid ones at
# most 10x a plain verify of them.
#
#   bench/run_explain.sh [IDEM]      COUNT=1000000 INVALID=10000 ROUNDS=3
#
# Corpora: COUNT valid Stripe deliveries (bench/gen_deliveries.py, about
# 1 KB each), and INVALID taken from them and broken the ways --explain
# knows (pretty-printed or compacted bodies, a newline, an older clock) and
# the way it must not explain (a tampered amount, another secret): a quarter
# each of explainable and forged at least. Runs are interleaved, medians.
set -euo pipefail
cd "$(dirname "$0")/.."
IDEM=${1:-build/idem}
COUNT=${COUNT:-1000000}
INVALID=${INVALID:-10000}
ROUNDS=${ROUNDS:-3}
OUT=bench/out
mkdir -p "$OUT"
valid="$OUT/deliveries-valid-$COUNT.ndjson"
if [ ! -s "$valid" ]; then
    echo "generating $COUNT valid deliveries into $valid ..."
    python3 bench/gen_deliveries.py --count "$COUNT" --bad-fraction 0 "$valid" > /dev/null
fi
secret=$(python3 -c 'import sys; sys.path.insert(0, "bench"); import gen_deliveries; print(gen_deliveries.SECRET)')
broken="$OUT/deliveries-broken-$INVALID.ndjson"
python3 - "$valid" "$broken" "$INVALID" "$secret" <<'PY'
import hashlib, hmac, itertools, json, sys
valid, broken, count, secret = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with open(valid) as source, open(broken, "w") as out:
    for i, line in enumerate(itertools.islice(source, count)):
        record = json.loads(line)
        body = record["body"]
        kind = i % 6
        if kind == 0:    # compacted on the way (Stripe sends it pretty-printed)
            record["body"] = json.dumps(json.loads(body), separators=(",", ":"))
        elif kind == 1:  # a newline added
            record["body"] = body + "\n"
        elif kind == 2:  # line endings changed
            record["body"] = body.replace("\n", "\r\n")
        elif kind == 3:  # signed 20 minutes before it was received: stale
            headers = dict(record["headers"])
            t = int(headers["Stripe-Signature"].split(",")[0][2:]) - 1200
            sig = hmac.new(secret.encode(), f"{t}.{body}".encode(), hashlib.sha256).hexdigest()
            record["headers"] = [[k, f"t={t},v1={sig}" if k == "Stripe-Signature" else v] for k, v in record["headers"]]
        elif kind == 4:  # forged: a tampered amount
            record["body"] = body.replace('"amount": ', '"amount": 9', 1)
        else:            # forged: another secret
            headers = dict(record["headers"])
            t = headers["Stripe-Signature"].split(",")[0][2:]
            sig = hmac.new(b"whsec_someone_else", f"{t}.{body}".encode(), hashlib.sha256).hexdigest()
            record["headers"] = [[k, f"t={t},v1={sig}" if k == "Stripe-Signature" else v] for k, v in record["headers"]]
        out.write(json.dumps(record) + "\n")
PY
cat "$valid" "$broken" > /dev/null
times="$OUT/explain.tsv"
: > "$times"
for round in $(seq "$ROUNDS"); do
    for corpus in valid broken; do
        file=$valid
        [ "$corpus" = broken ] && file=$broken
        order="plain explain"
        [ $((round % 2)) = 0 ] && order="explain plain"
        for mode in $order; do
            flag=()
            [ "$mode" = explain ] && flag=(--explain)
            /usr/bin/time -f '%e %M' -o "$OUT/explain.time" "$IDEM" verify -q --scheme stripe --secret "$secret" \
                --summary json "${flag[@]}" "$file" > /dev/null 2> "$OUT/explain-$corpus-$mode.err" || true
            read -r seconds rss < <(tail -n 1 "$OUT/explain.time")
            printf '%s\t%s\t%s\t%s\n' "$corpus" "$mode" "$seconds" "$rss" >> "$times"
        done
    done
done
python3 - "$times" "$OUT" <<'PY'
import json, statistics, sys
rows = [line.split("\t") for line in open(sys.argv[1]).read().splitlines()]
def median(corpus, mode):
    return statistics.median(float(r[2]) for r in rows if r[0] == corpus and r[1] == mode)
for corpus in ("valid", "broken"):
    plain, explain = median(corpus, "plain"), median(corpus, "explain")
    summary = json.loads(open(f"{sys.argv[2]}/explain-{corpus}-explain.err").read().strip().splitlines()[-1])
    kinds = {p["cause"]: p["deliveries"] for p in summary.get("causes", [])}
    print(f"{corpus:<7} {summary['in']:>8} deliveries: verify {plain:.2f} s, verify --explain {explain:.2f} s "
          f"({explain / plain:.2f}x); invalid {summary['invalid']}, explained {summary.get('explained', 0)}, "
          f"unexplained {summary.get('unexplained', 0)} {kinds}")
PY
