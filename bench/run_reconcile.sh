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
measure() { # name, output file, command...
    local name=$1 out=$2
    shift 2
    /usr/bin/time -f '%e %M' -o "$OUT/reconcile.time" "$@" > "$out" 2> "$OUT/reconcile.err" || true
    read -r seconds rss < <(tail -n 1 "$OUT/reconcile.time")
    printf '%-44s %7.2f s %8.0f MiB\n' "$name" "$seconds" "$((rss / 1024))"
}
echo "$(wc -l < "$flow/sent.ndjson") sent, $(wc -l < "$flow/received.ndjson") received, $(wc -l < "$flow/processed.ndjson") processed"
reconcile=(reconcile --fail-on none --stage "sent=$flow/sent.ndjson" --stage "received=$flow/received.ndjson"
           --stage "processed=$flow/processed.ndjson" --key sent=id --key received=body.id
           --key processed=event_id --time sent=created --time processed=ts --grace 60s --report json -q)
measure "idem reconcile" "$OUT/reconcile-idem.json" "$IDEM" "${reconcile[@]}"
# Bounded memory: at most SPILL keys in memory, the rest in partition files.
SPILL=${SPILL:-$((COUNT / 8))}
measure "idem reconcile, grouped on disk (--spill-after $SPILL)" "$OUT/reconcile-idem-disk.json" \
    "$IDEM" "${reconcile[@]}" --spill-after "$SPILL" --spill-dir "$OUT"
cmp -s "$OUT/reconcile-idem.json" "$OUT/reconcile-idem-disk.json" &&
    echo "the report grouped on disk is the in-memory one, byte for byte" ||
    echo "the report grouped on disk DIFFERS from the in-memory one"
if [ "$DUCKDB" = yes ]; then
    measure "DuckDB (node-api): the same joins" "$OUT/reconcile-duckdb.json" node "$DUCKDB_DIR/reconcile_duckdb.mjs" "$flow"
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
