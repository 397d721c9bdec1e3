#!/usr/bin/env bash
# --since/--until on a log in time order (issue: logs as they are kept):
# `idem dedup --since T` reading every line against the same with --sorted,
# which cuts the file to the window by binary search and counts the lines
# outside it unread. The window is the log's last twentieth.
#
#   bench/run_sorted_window.sh [IDEM]      COUNT=1000000, REPEAT=3
#
# Both outputs must be the same lines. A shared machine: read the ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
IDEM=${1:-build/idem}
COUNT=${COUNT:-1000000}
REPEAT=${REPEAT:-3}
OUT=bench/out
mkdir -p "$OUT"
corpus="$OUT/events-$COUNT.ndjson"
sorted="$OUT/events-$COUNT.sorted.ndjson"
[ -s "$corpus" ] || python3 bench/gen_events.py --count "$COUNT" "$corpus" > /dev/null
if [ ! -s "$sorted" ]; then
    # In order of `created`, as a capture log is in order of arrival.
    python3 -c 'import json, sys
for line in open(sys.argv[1]):
    sys.stdout.write(str(json.loads(line)["created"]) + "\t" + line)' "$corpus" |
        sort -s -n -t "$(printf '\t')" -k1,1 | cut -f2- > "$sorted"
fi
since=$(python3 -c 'import json, sys
first = json.loads(open(sys.argv[1]).readline())["created"]
last = json.loads(open(sys.argv[1], "rb").readlines()[-1])["created"]
print(last - (last - first) // 20)' "$sorted")
args=(dedup -q --key id --time-field created --store :memory: --since "$since")
median() { sort -n | sed -n "$(( (REPEAT + 1) / 2 ))p"; }
for contender in whole sorted; do
    extra=()
    [ "$contender" = sorted ] && extra=(--sorted)
    for _ in $(seq "$REPEAT"); do
        /usr/bin/time -f '%e' -o "$OUT/window.time" "$IDEM" "${args[@]}" "${extra[@]}" "$sorted" \
            > "$OUT/window-$contender.out"
        cat "$OUT/window.time"
    done | median > "$OUT/window-$contender.median"
done
cmp -s "$OUT/window-whole.out" "$OUT/window-sorted.out" || { echo "the outputs differ" >&2; exit 1; }
printf 'contender\tseconds\n'
printf 'idem dedup --since (every line read)\t%s\n' "$(cat "$OUT/window-whole.median")"
printf 'idem dedup --since --sorted\t%s\n' "$(cat "$OUT/window-sorted.median")"
printf 'records kept\t%s\n' "$(wc -l < "$OUT/window-sorted.out")"
