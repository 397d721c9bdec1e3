#!/usr/bin/env bash
# idem reconcile side by side with DuckDB doing the same joins (issue: reconcile).
#
#   bench/run_reconcile.sh [IDEM]      COUNT=1000000 by default
#
# The flow (bench/gen_reconcile.py): COUNT events through three stages,
# 1% lost per hop, 2% received twice, 0.5% late. DuckDB comes from npm
# (@duckdb/node-api, its Linux binary as an npm package) into
# bench/out/duckdb, only for this benchmark; without npm, sqlite3 does the
# joins instead. The lost and duplicated counts must agree.
set -euo pipefail
cd "$(dirname "$0")/.."
IDEM=${1:-build/idem}
COUNT=${COUNT:-1000000}
OUT=bench/out
flow="$OUT/reconcile-$COUNT"
if [ ! -s "$flow/processed.ndjson" ]; then
    echo "generating $COUNT events through three stages into $flow ..."
    python3 bench/gen_reconcile.py --count "$COUNT" "$flow"
fi
cat "$flow"/*.ndjson > /dev/null
. bench/duckdb.sh
ensure_duckdb
ROUNDS=${ROUNDS:-3}
results="$OUT/reconcile-results.tsv"
: > "$results"
# One run of a contender: a line of name, seconds and peak RSS (KiB).
measure() { # name, output file, command...
    local name=$1 out=$2
    shift 2
    /usr/bin/time -f '%e %M' -o "$OUT/reconcile.time" "$@" > "$out" 2> "$OUT/reconcile.err" || true
    read -r seconds rss < <(tail -n 1 "$OUT/reconcile.time")
    printf '%s\t%s\t%s\n' "$name" "$seconds" "$rss" >> "$results"
}
echo "$(wc -l < "$flow/sent.ndjson") sent, $(wc -l < "$flow/received.ndjson") received, $(wc -l < "$flow/processed.ndjson") processed"
reconcile=(reconcile --fail-on none --stage "sent=$flow/sent.ndjson" --stage "received=$flow/received.ndjson"
           --stage "processed=$flow/processed.ndjson" --key sent=id --key received=body.id
           --key processed=event_id --time sent=created --time processed=ts --grace 60s --report json -q)
# Bounded memory: at most SPILL keys in memory, the rest in partition files.
SPILL=${SPILL:-$((COUNT / 8))}
# The parse floor over the three stages on every core, their key and time
# fields only: the floor of the three files, added up.
. bench/floor.sh
ensure_floor
floor_once() {
    local total=0 one
    for stage in "sent.ndjson id,created" "received.ndjson body.id,received_at" "processed.ndjson event_id,ts"; do
        set -- $stage
        one=$("$FLOOR" "$flow/$1" --threads "$(nproc)" --keys "$2" | python3 -c 'import json, sys; print(json.load(sys.stdin)["seconds"])')
        total=$(python3 -c "print($total + $one)")
    done
    printf '%s\t%s\t0\n' "parse floor, the three files" "$total" >> "$results"
}
# The contenders in turn, ROUNDS times: the machine's other load falls on
# each alike.
for _ in $(seq "$ROUNDS"); do
    measure "idem reconcile, in memory (--spill-after 0)" "$OUT/reconcile-idem.json" \
        "$IDEM" "${reconcile[@]}" --spill-after 0
    measure "idem reconcile, on disk past --spill-after $SPILL" "$OUT/reconcile-idem-disk.json" \
        "$IDEM" "${reconcile[@]}" --spill-after "$SPILL" --spill-dir "$OUT"
    [ "$DUCKDB" = yes ] && measure "DuckDB (node-api): the same joins" "$OUT/reconcile-duckdb.json" \
        node "$DUCKDB_DIR/reconcile_duckdb.mjs" "$flow"
    floor_once
done
cmp -s "$OUT/reconcile-idem.json" "$OUT/reconcile-idem-disk.json" &&
    echo "the report grouped on disk is the in-memory one, byte for byte" ||
    echo "the report grouped on disk DIFFERS from the in-memory one"
python3 - "$results" "$ROUNDS" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, seconds, rss = line.rstrip("\n").split("\t")
    runs.setdefault(name, []).append((float(seconds), int(rss)))
median = {name: statistics.median(s for s, _ in measured) for name, measured in runs.items()}
duck = median.get("DuckDB (node-api): the same joins")
floor = median["parse floor, the three files"]
print(f"{'contender':52} {'seconds':>8} {'peak RSS':>10} {'vs DuckDB':>10} {'floor/it':>9}  "
      f"(median of {sys.argv[2]}, interleaved; each run's seconds)")
for name, measured in runs.items():
    rss = statistics.median(r for _, r in measured)
    versus = f"{median[name] / duck:9.2f}x" if duck and not name.startswith("parse") else ""
    fraction = f"{floor / median[name]:9.2f}" if not name.startswith("parse") else ""
    each = " ".join(f"{s:.2f}" for s, _ in measured)
    print(f"{name:52} {median[name]:8.2f} {rss / 1024:7.0f} MiB {versus:>10} {fraction:>9}  {each}")
PY
if [ "$DUCKDB" = yes ]; then
    python3 - "$OUT/reconcile-idem.json" "$OUT/reconcile-duckdb.json" <<'PY'
import json, sys
idem = json.load(open(sys.argv[1]))
duck = json.load(open(sys.argv[2]))
hops = {f"{h['from']}_{h['to']}": h["lost"] for h in idem["hops"]}
ours = {"sent_received": hops["sent_received"], "received_processed": hops["received_processed"],
        "duplicated": idem["findings"]["duplicated"]["count"], "orphan": idem["findings"]["orphan"]["count"]}
theirs = {"sent_received": int(duck["sent_received"]["lost"]), "received_processed": int(duck["received_processed"]["lost"]),
          "duplicated": int(duck["duplicated"]["duplicated"]), "orphan": int(duck["orphan"]["orphan"])}
print("counts agree" if ours == theirs else f"counts DIFFER: idem {ours}, DuckDB {theirs}")
PY
else
    echo "DuckDB could not be installed from npm here: see docs/reconcile.md for the sqlite3 comparison"
fi
