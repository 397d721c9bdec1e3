#!/usr/bin/env bash
# How idem's cost grows with the input (issue: scale): dedup (:memory: and
# a SQLite store, fresh and then again into the populated store), audit and
# reorder over 1M, 10M and 50M small records (~200 bytes, bench/gen_small.py,
# generated on the fly into a scratch folder and deleted after each size),
# with DuckDB's count-only and GROUP BY queries beside them; and one million
# new records run into each size's populated store and into a fresh one.
#
#   bench/run_scale.sh [IDEM]      SIZES="1000000 10000000 50000000" by default
#
# Prints per size and contender: seconds, records/s, seconds per million
# records (flat when the cost is linear), peak RSS and store size. DuckDB
# comes from npm into bench/out/duckdb, only for benchmarks; without it the
# script says so and goes on. Free space is checked before each size (the
# corpus is ~200 bytes per record, a SQLite store ~100 more): a size that
# does not fit is skipped, saying so. REPEAT=N runs each contender N times
# and reports the median (default 1: 50M records take minutes each).
set -euo pipefail
cd "$(dirname "$0")/.."
IDEM=${1:-build/idem}
SIZES=${SIZES:-"1000000 10000000 50000000"}
REPEAT=${REPEAT:-1}
OUT=bench/out
SCRATCH=${SCRATCH:-$OUT/scale}
mkdir -p "$OUT" "$SCRATCH"
results="$OUT/scale-results.tsv"
: > "$results"

. bench/duckdb.sh
ensure_duckdb

# name, size, store file or "", command...: the median of REPEAT runs.
contend() {
    local name=$1 size=$2 store=$3
    shift 3
    : > "$SCRATCH/times"
    for _ in $(seq "$REPEAT"); do
        [ "${INTO_STORE:-no}" = yes ] || { [ -n "$store" ] && rm -f "$store"*; }
        /usr/bin/time -f '%e %M' -o "$SCRATCH/time" "$@" > /dev/null 2> "$SCRATCH/err" || {
            echo "  $name failed: $(tail -n 3 "$SCRATCH/err")"
            return 0
        }
        cat "$SCRATCH/time" >> "$SCRATCH/times"
    done
    local seconds rss store_bytes=0
    read -r seconds rss < <(sort -n "$SCRATCH/times" | sed -n "$(( (REPEAT + 1) / 2 ))p")
    # The store's file and its saved index's files beside it.
    [ -n "$store" ] && [ -f "$store" ] &&
        store_bytes=$(stat -c %s "$store" "$store"-index-* 2> /dev/null | awk '{ s += $1 } END { printf "%.0f", s }')
    printf '%s\t%s\t%s\t%s\t%s\n' "$size" "$name" "$seconds" "$rss" "$store_bytes" >> "$results"
    printf '  %-40s %8.2f s %8.0f MiB\n' "$name" "$seconds" "$((rss / 1024))"
}

# One million records whose keys no corpus has (another seed), run into
# each size's populated store and into a fresh one.
probe="$SCRATCH/small-probe-1000000.ndjson"
[ -s "$probe" ] || python3 bench/gen_small.py --count 1000000 --seed 8 "$probe"

for size in $SIZES; do
    corpus="$SCRATCH/small-$size.ndjson"
    store="$SCRATCH/scale.db"
    need=$(( size * 320 / 1024 / 1024 ))    # MiB: the corpus and a store
    free=$(( $(df -Pk "$SCRATCH" | awk 'NR == 2 {print $4}') / 1024 ))
    if [ ! -s "$corpus" ] && [ "$free" -lt "$need" ]; then
        echo "$size records: skipped, $need MiB needed in $SCRATCH and $free MiB free"
        continue
    fi
    if [ ! -s "$corpus" ]; then
        echo "$size records: generating into $corpus ($need MiB with the store; $free MiB free) ..."
        python3 bench/gen_small.py --count "$size" "$corpus"
    fi
    cat "$corpus" > /dev/null
    echo "$size records ($(( $(stat -c %s "$corpus") / 1024 / 1024 )) MiB):"
    # Interleaved: each idem contender, then DuckDB doing the same job.
    contend "idem dedup :memory:" "$size" "" "$IDEM" dedup -q --key key --store :memory: "$corpus"
    [ "$DUCKDB" = yes ] && contend "duckdb count(distinct key)" "$size" "" \
        node "$DUCKDB_DIR/duckdb_keys.mjs" count "$corpus" "{key:'varchar'}" key
    contend "idem dedup, SQLite store" "$size" "$store" "$IDEM" dedup -q --key key --store "$store" "$corpus"
    INTO_STORE=yes contend "idem dedup, SQLite again (all seen)" "$size" "$store" \
        "$IDEM" dedup -q --key key --store "$store" --scope default "$corpus"
    # A run of new records into the store holding this size's keys, beside
    # the same run into a fresh store: opening must not cost the store's size.
    INTO_STORE=yes contend "idem dedup, 1M new into that store" "$size" "$store" \
        "$IDEM" dedup -q --key key --store "$store" "$probe"
    rm -f "$store"*
    contend "idem dedup, 1M new into a fresh store" "$size" "$store" \
        "$IDEM" dedup -q --key key --store "$store" "$probe"
    rm -f "$store"*
    contend "idem audit" "$size" "" "$IDEM" audit -q --fail-on none --key key --time-field ts --format json "$corpus"
    [ "$DUCKDB" = yes ] && contend "duckdb group by key having count > 1" "$size" "" \
        node "$DUCKDB_DIR/duckdb_keys.mjs" groups "$corpus" "{key:'varchar'}" key
    contend "idem reorder :memory:" "$size" "" \
        "$IDEM" reorder -q --seq seq --partition p --start 1 --window 64 --store :memory: "$corpus"
    [ "${KEEP:-no}" = yes ] || rm -f "$corpus"
done

python3 - "$results" <<'PY'
import sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
print(f"\n{'records':>10}  {'contender':<40} {'seconds':>8} {'records/s':>10} {'s per 1M':>9} {'RSS MiB':>8} {'store MiB':>9}")
for size, name, seconds, rss, store in rows:
    size, seconds = int(size), float(seconds)
    records = 1_000_000 if "1M new" in name else size
    per_second = records / seconds if seconds else float("inf")
    store_mib = f"{int(store) / 2**20:9.0f}" if int(store) else f"{'':>9}"
    print(f"{size:>10}  {name:<40} {seconds:>8.2f} {per_second / 1e6:>9.2f}M {seconds / (records / 1e6):>9.3f} "
          f"{int(rss) / 1024:>8.0f} {store_mib}")
PY
