#!/usr/bin/env bash
# idem reorder side by side with what users do today (issue: reorder).
#
#   bench/run_reorder.sh [IDEM]     COUNT=10000000 PARTITIONS=100000 by default
#
# The corpus (bench/gen_reorder.py): small records over many partitions,
# displaced by up to 5,000 positions, 0.1% never sent (gaps), 0.1% sent
# twice. Contenders: idem with one worker (--threads 1) with :memory: and with
# the SQLite store, and pinned to one core (taskset); and whole-file ordering:
# jq | sort -n | cut, and a Python script that loads and sorts everything. Neither of those reports gaps or
# duplicates, and both need the whole file before writing the first record.
# Every output is checked against the generator's truth. One run on a shared
# machine: read the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
IDEM=${1:-build/idem}
COUNT=${COUNT:-10000000}
PARTITIONS=${PARTITIONS:-100000}
PYTHON=${PYTHON:-1}
OUT=bench/out
mkdir -p "$OUT"
corpus="$OUT/reorder-$COUNT-$PARTITIONS.ndjson"
if [ ! -s "$corpus" ] || [ ! -s "$corpus.truth" ]; then
    echo "generating $COUNT records over $PARTITIONS partitions into $corpus ..."
    python3 bench/gen_reorder.py --count "$COUNT" --partitions "$PARTITIONS" "$corpus"
fi
cat "$corpus" > /dev/null

results="$OUT/reorder-results.tsv"
: > "$results"
SPOOL=$(mktemp -d /dev/shm/idem-bench.XXXXXX 2>/dev/null || mktemp -d "$OUT/spool.XXXXXX")
trap 'rm -rf "$SPOOL"' EXIT
# Timed with the output to /dev/null, then run again into a spool file that
# is checked (see run_dedup.sh for why).
contend() {
    local name=$1 slug=$2 check=$3
    shift 3
    rm -f "$OUT/$slug.db"*
    /usr/bin/time -f '%e %M' -o "$OUT/$slug.time" "$@" > /dev/null 2> "$OUT/$slug.err" || true
    rm -f "$OUT/$slug.db"*
    "$@" > "$SPOOL/$slug.out" 2>> "$OUT/$slug.err" || true
    local ok
    ok=$(python3 bench/check_reorder.py "$SPOOL/$slug.out" "$corpus.truth" $check)
    rm -f "$SPOOL/$slug.out" "$OUT/$slug.db"*
    read -r seconds rss < "$OUT/$slug.time"
    local held
    held=$(python3 -c 'import json,sys
try: print(json.loads(open(sys.argv[1]).read().strip().splitlines()[0])["peak_held_bytes"])
except Exception: print(0)' "$OUT/$slug.err")
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$seconds" "$rss" "$held" "$ok" >> "$results"
}

reorder=(reorder --seq seq --partition p --start 1 --window 64 --threads 1 -q --summary json
         --late "$SPOOL/late.ndjson")
contend "idem reorder :memory:" idem_memory "" "$IDEM" "${reorder[@]}" --store :memory: "$corpus"
contend "idem reorder sqlite" idem_sqlite "" "$IDEM" "${reorder[@]}" --store "$OUT/idem_sqlite.db" "$corpus"
# The reader and the parsing worker share one core: the "one core" figure.
if command -v taskset > /dev/null; then
    contend "idem sqlite, 1 core" idem_one_core "" taskset -c 0 "$IDEM" "${reorder[@]}" \
        --store "$OUT/idem_one_core.db" "$corpus"
fi
contend "jq | sort -n | cut" jq_sort --whole-file sh -c \
    "jq -r '[.p, .seq] | @tsv' '$corpus' | paste - '$corpus' | sort -t '	' -k1,1 -k2,2n -S 25% | cut -f3-"
if [ "$PYTHON" = 1 ]; then
    contend "python3 load+sort" python_sort --whole-file sh -c "python3 bench/reorder_python_sort.py < '$corpus'"
fi

. bench/floor.sh
FLOOR_KEYS=seq,p floor_fraction "idem reorder :memory:" "$corpus" "$(nproc)" -- "$IDEM" "${reorder[@]}" --store :memory: "$corpus"

python3 - "$COUNT" "$results" <<'PY'
import sys
count = int(sys.argv[1])
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[2])]
print(f"{'contender':24} {'seconds':>8} {'records/s':>12} {'peak RSS':>10} {'held at peak':>13}  output checked")
for name, seconds, rss, held, ok in rows:
    held_text = f"{int(held) / 2**20:8.1f} MiB" if int(held) else "        -"
    print(f"{name:24} {float(seconds):8.2f} {count / float(seconds):12,.0f} {int(rss) / 1024:7.0f} MiB {held_text}  {ok}")
table = {name: (float(seconds), int(rss), int(held)) for name, seconds, rss, held, _ in rows}
print()
for name in ("idem reorder :memory:", "idem reorder sqlite", "idem sqlite, 1 core"):
    if name not in table:
        continue
    seconds, rss_kib, held = table[name]
    limit = 2 * held + 50 * 2**20
    print(f"{name}: {count / seconds / 1e6:4.2f}M records/s (target >= 1M on one core); "
          f"peak RSS {rss_kib / 1024:.0f} MiB vs 2 x held + 50 MiB = {limit / 2**20:.0f} MiB "
          f"({'within' if rss_kib * 1024 <= limit else 'OVER'})")
    for other in ("jq | sort -n | cut", "python3 load+sort"):
        if other in table:
            print(f"  vs {other}: {table[other][0] / seconds:5.1f}x faster, "
                  f"and it takes {table[other][1] / rss_kib:5.1f}x the memory")
sys.exit(0 if all(row[-1] == "yes" for row in rows) else 1)
PY
