#!/usr/bin/env bash
# idem states side by side with what users would write instead (issue: states).
#
#   bench/run_states.sh [IDEM]      COUNT=1000000 ENTITIES=100000 by default
#
# The corpus (bench/gen_states.py): 100k orders' lives, ~1M events in
# version order, 0.5% with a planted fault; the machine is
# bench/states-machine.yaml. Contenders: idem (ordered by version, as a
# postmortem would; in arrival order; with a SQLite store that keeps every
# entity's state), and a Python dict of states (bench/states_python.py),
# which checks in arrival order only. The finding counts must agree.
set -euo pipefail
cd "$(dirname "$0")/.."
IDEM=${1:-build/idem}
COUNT=${COUNT:-1000000}
ENTITIES=${ENTITIES:-100000}
OUT=bench/out
mkdir -p "$OUT"
corpus="$OUT/states-$COUNT-$ENTITIES.ndjson"
if [ ! -s "$corpus" ]; then
    echo "generating about $COUNT events of $ENTITIES orders into $corpus ..."
    python3 bench/gen_states.py --count "$COUNT" --entities "$ENTITIES" "$corpus"
fi
cat "$corpus" > /dev/null
ROUNDS=${ROUNDS:-3}
results="$OUT/states-results.tsv"
: > "$results"
# One run of a contender: a line of name, seconds, RSS (KiB) and slug.
contend() {
    local name=$1 slug=$2
    shift 2
    rm -f "$OUT/$slug.db"*
    /usr/bin/time -f '%e %M' -o "$OUT/$slug.time" "$@" > "$OUT/$slug.out" 2> "$OUT/$slug.err" || true
    rm -f "$OUT/$slug.db"*
    read -r seconds rss < <(tail -n 1 "$OUT/$slug.time")
    printf '%s\t%s\t%s\t%s\n' "$name" "$seconds" "$rss" "$slug" >> "$results"
}
states=(states --entity order_id --state status --machine bench/states-machine.yaml --report json
        --fail-on none -q)
for _ in $(seq "$ROUNDS"); do
    contend "idem states, by version" idem_version "$IDEM" "${states[@]}" --version-field version \
        --store :memory: "$corpus"
    contend "python dict of states" python python3 bench/states_python.py "$corpus"
    contend "idem states, arrival order" idem_arrival "$IDEM" "${states[@]}" --store :memory: "$corpus"
    contend "idem states, by version, SQLite store" idem_sqlite "$IDEM" "${states[@]}" --version-field version \
        --store "$OUT/idem_sqlite.db" "$corpus"
done

. bench/floor.sh
FLOOR_KEYS=order_id,status floor_fraction "idem states, arrival order" "$corpus" "$(nproc)" -- "$IDEM" "${states[@]}" --store :memory: "$corpus"

python3 - "$results" "$OUT" "$(wc -l < "$corpus")" "$ENTITIES" "$ROUNDS" <<'PY'
import json, statistics, sys
results, out, count, entities, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
runs = {}
for line in open(results):
    name, seconds, rss, slug = line.rstrip("\n").split("\t")
    runs.setdefault((name, slug), []).append((float(seconds), int(rss)))
truth = json.load(open(f"{out}/python.out"))
python_seconds = statistics.median(s for s, _ in runs[("python dict of states", "python")])
print(f"{'contender':<40} {'seconds':>8} {'events/s':>9} {'vs python':>10} {'RSS MiB':>8}  findings    "
      f"(median of {rounds}; each run's seconds)")
for (name, slug), measured in runs.items():
    seconds = statistics.median(s for s, _ in measured)
    rss = statistics.median(r for _, r in measured)
    if slug == "python":
        ok = "reference"
    else:
        found = {k: v for k, v in json.load(open(f"{out}/{slug}.out"))["findings"].items() if v}
        ok = "same" if found == truth else f"DIFFERENT {found}"
    each = " ".join(f"{s:.2f}" for s, _ in measured)
    print(f"{name:<40} {seconds:>8.2f} {count / seconds / 1e6:>8.2f}M {python_seconds / seconds:>9.1f}x "
          f"{rss / 1024:>8.0f}  {ok:<10}  {each}")
print(f"{entities} entities. The seed quotes 15,000 ops/s for its optimistic-lock scheme (a service).")
PY
