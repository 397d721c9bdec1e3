#!/usr/bin/env bash
# idem over compressed logs beside what users run instead (issue: logs as
# they are kept): `idem dedup day.ndjson.gz` against `zcat | idem dedup -`,
# the same for zstd against `zstdcat |`, both against idem on the plain
# file, and DuckDB's read_json on the same .gz and .zst.
#
#   bench/run_compressed.sh [IDEM]      COUNT=1000000, REPEAT=3, PAIRS=9
#
# The .zst-to-plain ratio, the one with a target, comes from PAIRS runs of
# the two in turn (plain, .zst, plain, ...), the median of each pair's
# ratio: the machine's drift falls on both. It is taken with the default
# SQLite store, as `idem dedup day.ndjson.zst` runs, and with :memory:.
# Every idem output's ids are checked against the generator's ground truth;
# DuckDB counts the distinct keys. A shared machine: read the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
IDEM=${1:-build/idem}
COUNT=${COUNT:-1000000}
REPEAT=${REPEAT:-3}
OUT=bench/out
mkdir -p "$OUT"
corpus="$OUT/events-$COUNT.ndjson"
[ -s "$corpus" ] && [ -s "$corpus.truth" ] || python3 bench/gen_events.py --count "$COUNT" "$corpus" > /dev/null
[ -s "$corpus.gz" ] || gzip -6 -c "$corpus" > "$corpus.gz"
[ -s "$corpus.zst" ] || zstd -q -3 -c "$corpus" > "$corpus.zst"
cat "$corpus" "$corpus.gz" "$corpus.zst" > /dev/null

results="$OUT/compressed-results.tsv"
: > "$results"
SPOOL=$(mktemp -d /dev/shm/idem-bench.XXXXXX 2>/dev/null || mktemp -d "$OUT/spool.XXXXXX")
trap 'rm -rf "$SPOOL"' EXIT
key=(-q --key data.object.id,type --store :memory:)
# Timed REPEAT times, the median reported; then run once more into a spool
# file checked against the ground truth.
contend() {
    local name=$1 slug=$2
    shift 2
    : > "$OUT/$slug.times"
    for _ in $(seq "$REPEAT"); do
        /usr/bin/time -f '%e %M' -o "$OUT/$slug.time" "$@" > /dev/null 2> "$OUT/$slug.err" || true
        cat "$OUT/$slug.time" >> "$OUT/$slug.times"
    done
    sort -n "$OUT/$slug.times" | sed -n "$(( (REPEAT + 1) / 2 ))p" > "$OUT/$slug.time"
    "$@" > "$SPOOL/$slug.out" 2>> "$OUT/$slug.err" || true
    local ok
    ok=$(python3 - "$SPOOL/$slug.out" "$corpus.truth" <<'PY'
import json, sys
ids = [json.loads(line)["id"] for line in open(sys.argv[1])]
truth = [line.strip() for line in open(sys.argv[2])]
print("yes" if ids == truth else f"NO ({len(ids)} ids, {len(truth)} expected)")
PY
)
    rm -f "$SPOOL/$slug.out"
    read -r seconds rss < "$OUT/$slug.time"
    printf '%s\t%s\t%s\t%s\n' "$name" "$seconds" "$rss" "$ok" >> "$results"
}

contend "idem plain" plain "$IDEM" dedup "${key[@]}" "$corpus"
contend "idem .gz" gz "$IDEM" dedup "${key[@]}" "$corpus.gz"
contend "zcat | idem" zcat sh -c "zcat '$corpus.gz' | '$IDEM' dedup ${key[*]} -"
contend "idem .zst" zst "$IDEM" dedup "${key[@]}" "$corpus.zst"
contend "zstdcat | idem" zstdcat sh -c "zstdcat '$corpus.zst' | '$IDEM' dedup ${key[*]} -"
. bench/duckdb.sh
ensure_duckdb
if [ "$DUCKDB" = yes ]; then
    for kind in gz zst; do
        : > "$OUT/duckdb_$kind.times"
        for _ in $(seq "$REPEAT"); do
            /usr/bin/time -f '%e %M' -o "$OUT/duckdb_$kind.time" node "$DUCKDB_DIR/duckdb_keys.mjs" count \
                "$corpus.$kind" "{data:'json', type:'varchar'}" \
                "json_extract_string(data, '\$.object.id') || '|' || type" > "$OUT/duckdb_$kind.out" \
                2> "$OUT/duckdb_$kind.err" || true
            cat "$OUT/duckdb_$kind.time" >> "$OUT/duckdb_$kind.times"
        done
        read -r seconds rss < <(sort -n "$OUT/duckdb_$kind.times" | sed -n "$(( (REPEAT + 1) / 2 ))p")
        ok=$(python3 -c 'import json, sys
counted = json.load(open(sys.argv[1]))["distinct_keys"]
truth = sum(1 for _ in open(sys.argv[2]))
print("yes (counted)" if int(counted) == truth else f"NO ({counted} keys, {truth} expected)")' \
            "$OUT/duckdb_$kind.out" "$corpus.truth" 2> /dev/null || echo "NO (no count)")
        printf '%s\t%s\t%s\t%s\n' "duckdb read_json .$kind" "$seconds" "$rss" "$ok" >> "$results"
    done
fi

# Interleaved: the ratio of each pair, then their median. Twice: as a user
# runs it (the default SQLite store, a fresh one per run, kept in the spool
# so a disk's flushes do not hide the decoding) and with --store :memory:,
# where the parse alone is left for the decoding to compete with.
PAIRS=${PAIRS:-9}
pairs() {
    local file=$1
    shift
    : > "$file"
    for _ in $(seq "$PAIRS"); do
        rm -f "$SPOOL"/pair.db*
        /usr/bin/time -f '%e' -o "$OUT/pair-plain.time" "$IDEM" dedup "$@" "$corpus" > /dev/null
        rm -f "$SPOOL"/pair.db*
        /usr/bin/time -f '%e' -o "$OUT/pair-zst.time" "$IDEM" dedup "$@" "$corpus.zst" > /dev/null
        echo "$(cat "$OUT/pair-zst.time") $(cat "$OUT/pair-plain.time")" >> "$file"
    done
    rm -f "$SPOOL"/pair.db*
}
pairs "$OUT/zst-pairs" -q --key data.object.id,type --store "$SPOOL/pair.db"
pairs "$OUT/zst-pairs-memory" "${key[@]}"

. bench/floor.sh
floor_fraction "idem .zst (floor on the plain file)" "$corpus" "$(nproc)" -- "$IDEM" dedup "${key[@]}" "$corpus.zst"

python3 - "$COUNT" "$results" "$OUT/zst-pairs" "$OUT/zst-pairs-memory" <<'PY'
import statistics
import sys
count = int(sys.argv[1])
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[2])]
table = {name: float(seconds) for name, seconds, _, _ in rows}
print(f"{'contender':24} {'seconds':>8} {'events/s':>12} {'peak RSS':>10}  output = ground truth")
for name, seconds, rss, ok in rows:
    print(f"{name:24} {float(seconds):8.2f} {count / float(seconds):12,.0f} {int(rss) / 1024:7.0f} MiB  {ok}")
print()
print(f"idem .gz / zcat | idem:      {table['idem .gz'] / table['zcat | idem']:5.2f}  (target <= 1)")
print(f"idem .zst / zstdcat | idem:  {table['idem .zst'] / table['zstdcat | idem']:5.2f}  (target <= 1)")
def median_ratio(path):
    pairs = [line.split() for line in open(path)]
    return len(pairs), statistics.median(float(zst) / max(float(plain), 0.01) for zst, plain in pairs)
n, ratio = median_ratio(sys.argv[3])
print(f"idem .zst / idem plain:      {ratio:5.2f}  (default SQLite store; median of {n} interleaved pairs; "
      "target <= 1.3 where decompression is not the bottleneck)")
n, ratio = median_ratio(sys.argv[4])
print(f"  the same, --store :memory: {ratio:5.2f}  (median of {n} pairs; the parse alone beside the decoding)")
for kind in ("gz", "zst"):
    if f"duckdb read_json .{kind}" in table:
        print(f"idem .{kind} vs DuckDB counting only: "
              f"{table[f'duckdb read_json .{kind}'] / table[f'idem .{kind}']:5.1f}x")
sys.exit(0 if all(ok.startswith("yes") for *_, ok in rows) else 1)
PY
