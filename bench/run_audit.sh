#!/usr/bin/env bash
# idem audit side by side with what users do today (issue: audit).
#
#   bench/run_audit.sh [IDEM]      COUNT=1000000 by default
#
# The corpus (bench/gen_audit.py): an API's request log where ~8% of keys
# occur more than once (retry storms, races, reused keys). Contenders:
# idem audit on one worker (table and JSON reports), jq -s 'group_by(.key)'
# (which loads everything), and the sqlite3 shell importing the log and
# running GROUP BY ... HAVING count(*) > 1 (which explains nothing). Each is
# checked against the generator's truth: the keys that occur more than once.
set -euo pipefail
cd "$(dirname "$0")/.."
IDEM=${1:-build/idem}
COUNT=${COUNT:-1000000}
OUT=bench/out
mkdir -p "$OUT"
corpus="$OUT/audit-$COUNT.ndjson"
if [ ! -s "$corpus" ] || [ ! -s "$corpus.truth" ]; then
    echo "generating $COUNT records into $corpus ..."
    python3 bench/gen_audit.py --count "$COUNT" "$corpus"
fi
cat "$corpus" > /dev/null

results="$OUT/audit-results.tsv"
: > "$results"
SPOOL=$(mktemp -d /dev/shm/idem-bench.XXXXXX 2>/dev/null || mktemp -d "$OUT/spool.XXXXXX")
trap 'rm -rf "$SPOOL"' EXIT
# Each contender prints the repeated keys (one per line, any order) to its
# spool file in a second, untimed run, which is checked against the truth.
contend() {
    local name=$1 slug=$2 keys=$3
    shift 3
    /usr/bin/time -f '%e %M' -o "$OUT/$slug.time" sh -c "$*" > /dev/null 2> "$OUT/$slug.err" || true
    sh -c "$*" 2>> "$OUT/$slug.err" | sh -c "$keys" | sort > "$SPOOL/$slug.keys" || true
    local ok="yes"
    cmp -s "$SPOOL/$slug.keys" "$corpus.truth" || ok="NO ($(wc -l < "$SPOOL/$slug.keys") keys)"
    read -r seconds rss < "$OUT/$slug.time"
    printf '%s\t%s\t%s\t%s\n' "$name" "$seconds" "$rss" "$ok" >> "$results"
}

audit="'$IDEM' audit -q --fail-on none --threads 1 --key key --time-field ts --source-field worker"
contend "idem audit (table)" idem_table "grep -o '^#[0-9]* .* key req_[0-9]*' | grep -o 'req_[0-9]*'" \
    "$audit '$corpus'"
contend "idem audit (json)" idem_json "jq -r '.groups[].key'" "$audit --format json '$corpus'"
contend "jq -s group_by" jq_group "jq -r '.[0].key'" \
    "jq -c -s 'group_by(.key) | map(select(length > 1)) | .[]' '$corpus'"
db="$SPOOL/sqlite3.db"
# The whole log into one column (ascii mode: no CSV quoting), then GROUP BY.
printf '%s\n' 'CREATE TABLE log(line TEXT);' '.mode ascii' '.separator "\037" "\n"' \
    ".import '$corpus' log" '.mode list' '.separator "|" "\n"' \
    "SELECT json_extract(line, '\$.key') AS k, count(*) FROM log GROUP BY k HAVING count(*) > 1;" \
    > "$SPOOL/group.sql"
contend "sqlite3 import + GROUP BY" sqlite3 "cut -d'|' -f1" \
    "rm -f '$db'; sqlite3 '$db' < '$SPOOL/group.sql'"

# DuckDB: the same grouping over the key column only (explains nothing).
. bench/duckdb.sh
ensure_duckdb
[ "$DUCKDB" = yes ] && contend "duckdb GROUP BY key" duckdb_group cat \
    "node '$DUCKDB_DIR/duckdb_keys.mjs' repeated '$corpus' \"{key:'varchar'}\" key"

# Against the parse floor: simdjson parsing every line on one thread, as
# the audit above runs (--threads 1), and on every core by default.
. bench/floor.sh
FLOOR_KEYS=key,ts,worker floor_fraction "idem audit --threads 1 (json)" "$corpus" 1 -- \
    sh -c "$audit --format json '$corpus'"
floor_fraction "idem audit (json), every core" "$corpus" "$(nproc)" -- \
    sh -c "'$IDEM' audit -q --fail-on none --key key --time-field ts --source-field worker --format json '$corpus'"

python3 - "$COUNT" "$results" <<'PY'
import sys
count = int(sys.argv[1])
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[2])]
print(f"{'contender':28} {'seconds':>8} {'records/s':>12} {'peak RSS':>10}  repeated keys = truth")
for name, seconds, rss, ok in rows:
    print(f"{name:28} {float(seconds):8.2f} {count / float(seconds):12,.0f} {int(rss) / 1024:7.0f} MiB  {ok}")
table = {name: float(seconds) for name, seconds, _, _ in rows}
idem = table["idem audit (json)"]
print()
print(f"idem (json): {count / idem / 1e3:.0f}k records/s on one worker (target >= 500k)")
print(f"vs jq -s group_by:  {table['jq -s group_by'] / idem:5.1f}x  (target >= 10x)")
print(f"vs sqlite3 shell:   {table['sqlite3 import + GROUP BY'] / idem:5.1f}x  (target >= 1x)")
if "duckdb GROUP BY key" in table:
    print(f"vs DuckDB GROUP BY: {table['duckdb GROUP BY key'] / idem:5.1f}x  (the scale issue asks >= 2x)")
sys.exit(0 if all(row[-1] == "yes" for row in rows) else 1)
PY
