#!/usr/bin/env bash
# Two builds of idem side by side on the record-reading commands, runs
# interleaved (A, B, A, B, ...) so that a shared machine's noise falls on
# both: the figure for a refactor that must change no speed.
#
#   bench/compare_builds.sh OLD_IDEM NEW_IDEM     ROUNDS=5, COUNT=1000000
#                                                 ONLY=REGEX: the commands to run
#
# Corpora are the other benchmarks' (generated on first use). Prints, per
# command, whether both builds wrote the same bytes, then the median
# seconds and peak RSS of each build and NEW/OLD; exits 1 when an output
# differs.
# Each build runs first in half of the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=${1:?usage: bench/compare_builds.sh OLD_IDEM NEW_IDEM}
NEW=${2:?usage: bench/compare_builds.sh OLD_IDEM NEW_IDEM}
ROUNDS=${ROUNDS:-5}
COUNT=${COUNT:-1000000}
OUT=bench/out
mkdir -p "$OUT"

events="$OUT/events-$COUNT.ndjson"
[ -s "$events" ] && [ -s "$events.truth" ] || python3 bench/gen_events.py --count "$COUNT" "$events" > /dev/null
reorder="$OUT/reorder-$COUNT-100000.ndjson"
[ -s "$reorder" ] && [ -s "$reorder.truth" ] ||
    python3 bench/gen_reorder.py --count "$COUNT" --partitions 100000 "$reorder"
audit="$OUT/audit-$COUNT.ndjson"
[ -s "$audit" ] && [ -s "$audit.truth" ] || python3 bench/gen_audit.py --count "$COUNT" "$audit"
deliveries="$OUT/deliveries-$COUNT.ndjson"
truth="$OUT/deliveries-$COUNT.truth.json"
[ -s "$deliveries" ] && [ -s "$truth" ] || python3 bench/gen_deliveries.py --count "$COUNT" "$deliveries" > "$truth"
secret=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret"])' "$truth")
states="$OUT/states-$COUNT-100000.ndjson"
[ -s "$states" ] || python3 bench/gen_states.py --count "$COUNT" --entities 100000 "$states"
merge="$OUT/merge-$COUNT.ndjson"
[ -s "$merge" ] || python3 bench/gen_merge.py --count "$COUNT" "$merge"
incidents="$OUT/events-incidents-$COUNT.ndjson"
[ -s "$incidents" ] || python3 bench/gen_events.py --count "$COUNT" --shape incidents "$incidents" > /dev/null
cat "$events" "$reorder" "$audit" "$deliveries" "$states" "$merge" "$incidents" > /dev/null

# What every figure below ran on: the CPU and the simdjson kernel (the one
# simdjson picks there, or SIMDJSON_FORCE_IMPLEMENTATION's: run the script
# under both, e.g. SIMDJSON_FORCE_IMPLEMENTATION=haswell).
[ -x build/parse_floor ] || cmake --build build --target parse_floor > /dev/null
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
echo "simdjson kernel: $(build/parse_floor "$incidents" --threads 1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["kernel"])')"

# name | arguments after the binary (the store, when any, is added per run)
cases=(
    "dedup :memory:|dedup -q --key data.object.id,type --store :memory: $events"
    "dedup sqlite|dedup -q --key data.object.id,type --store @DB@ $events"
    "dedup sqlite -o|dedup -q --key data.object.id,type --store @DB@ -o @OUT@ $events"
    "reorder sqlite|reorder -q --seq seq --partition p --start 1 --window 64 --threads 1 --store @DB@ $reorder"
    "audit|audit -q --threads 1 --key key --time-field ts --source-field worker $audit"
    "audit incidents|audit -q --key idempotency_key --fingerprint data.object.id,type --time-field delivery.received_at --format json $incidents"
    "verify|verify -q --scheme stripe --secret $secret $deliveries"
    "states version|states -q --entity order_id --state status --machine bench/states-machine.yaml --report json --fail-on none --version-field version --store :memory: $states"
    "states arrival|states -q --entity order_id --state status --machine bench/states-machine.yaml --report json --fail-on none --store :memory: $states"
    "merge|merge -q --group user_id,alert_type --window 5m --time-field ts --max-lateness 30s $merge"
)
if [ -n "${ONLY:-}" ]; then
    picked=()
    for entry in "${cases[@]}"; do
        [[ ${entry%%|*} =~ $ONLY ]] && picked+=("$entry")
    done
    cases=("${picked[@]}")
fi
SPOOL=$(mktemp -d /dev/shm/idem-ab.XXXXXX 2>/dev/null || mktemp -d "$OUT/ab.XXXXXX")
trap 'rm -rf "$SPOOL"' EXIT

# First what each build writes, byte for byte: stdout, and -o FILE where a
# case has one. A refactor changes none of it; the summary on stderr is
# left out (it holds the run's seconds).
differ=0
for entry in "${cases[@]}"; do
    name=${entry%%|*}
    args=${entry#*|}
    for build in old new; do
        binary=$OLD
        [ "$build" = new ] && binary=$NEW
        rm -f "$SPOOL"/ab.db* "$SPOOL"/ab.out
        run=${args//@DB@/$SPOOL/ab.db}
        run=${run//@OUT@/$SPOOL/ab.out}
        # shellcheck disable=SC2086
        "$binary" $run > "$SPOOL/$build.stdout" 2> /dev/null || true
        [ -f "$SPOOL/ab.out" ] && cat "$SPOOL/ab.out" >> "$SPOOL/$build.stdout"
    done
    if cmp -s "$SPOOL/old.stdout" "$SPOOL/new.stdout"; then
        echo "$name: the same output ($(wc -c < "$SPOOL/new.stdout") bytes)"
    else
        echo "$name: OUTPUT DIFFERS"
        differ=1
    fi
done
times="$OUT/compare-builds.tsv"
: > "$times"
for round in $(seq "$ROUNDS"); do
    for entry in "${cases[@]}"; do
        name=${entry%%|*}
        args=${entry#*|}
        # The order alternates by round: whichever runs second in a pair is
        # not always the same build.
        order="old new"
        [ $((round % 2)) = 0 ] && order="new old"
        for build in $order; do
            binary=$OLD
            [ "$build" = new ] && binary=$NEW
            rm -f "$SPOOL"/ab.db* "$SPOOL"/ab.out
            run=${args//@DB@/$SPOOL/ab.db}
            run=${run//@OUT@/$SPOOL/ab.out}
            # shellcheck disable=SC2086
            /usr/bin/time -f '%e %M' -o "$SPOOL/time" "$binary" $run > /dev/null 2> "$SPOOL/err" || true
            # /usr/bin/time puts "Command exited with non-zero status" first
            # when a run finds something (verify's invalid deliveries): its
            # figures are the last line.
            read -r seconds rss < <(tail -n 1 "$SPOOL/time")
            printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$build" "$round" "$seconds" "$rss" >> "$times"
        done
    done
done
python3 - "$times" <<'PY'
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
names = list(dict.fromkeys(r[0] for r in rows))
print(f"{'command':<18} {'old s':>7} {'new s':>7} {'new/old':>8} {'old MiB':>8} {'new MiB':>8}")
for name in names:
    med = {}
    for build in ("old", "new"):
        picked = [r for r in rows if r[0] == name and r[1] == build]
        med[build] = (statistics.median(float(r[3]) for r in picked),
                      statistics.median(int(r[4]) for r in picked) / 1024)
    print(f"{name:<18} {med['old'][0]:>7.2f} {med['new'][0]:>7.2f} {med['new'][0] / med['old'][0]:>8.2f}"
          f" {med['old'][1]:>8.0f} {med['new'][1]:>8.0f}")
PY
exit "$differ"
