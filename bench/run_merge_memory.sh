#!/usr/bin/env bash
# merge's memory against its open windows (docs/merge.md, "Crashes,
# memory, exit codes"): for each shape, peak RSS, the open windows' bytes
# as merge counts them (peak_open_bytes, what --max-open-bytes bounds),
# RSS per open window, and RSS against the documented bound
# (2x open bytes + 50 MB).
#
#   bench/run_merge_memory.sh [IDEM]      MERGE_GROUPS="300000 1000000" by default
#
# Shapes: one open window per group (tumbling 1h, 100-byte events, every
# group still open at the end); and 999 events of 100 KB of one group in
# sliding windows (1h every 1m: each event in 60 windows, sharing one copy).
set -euo pipefail
cd "$(dirname "$0")/.."
IDEM=${1:-build/idem}
GROUPS_LIST=${MERGE_GROUPS:-"300000 1000000"}
OUT=bench/out
mkdir -p "$OUT"

python3 - "$OUT" $GROUPS_LIST <<'PY'
import json, sys
out = sys.argv[1]
for count in map(int, sys.argv[2:]):
    path = f"{out}/merge-groups-{count}.ndjson"
    with open(path, "w") as f:
        for i in range(count):
            f.write(json.dumps({"user_id": f"u{i}", "ts": f"2026-11-30T08:{(i * 60 // count) % 60:02d}:00Z",
                                "text": "x" * 100}) + "\n")
with open(f"{out}/merge-sliding-100k.ndjson", "w") as f:
    for i in range(999):
        f.write(json.dumps({"g": 1, "ts": f"2026-11-30T08:{i // 60 % 60:02d}:{i % 60:02d}Z",
                            "text": "x" * 100000}) + "\n")
PY

measure() {
    local name=$1
    shift
    /usr/bin/time -f "%M" -o "$OUT/merge-memory.time" "$IDEM" merge "$@" --max-open-bytes 8GiB -q > /dev/null \
        2> "$OUT/merge-memory.err" || true
    "$IDEM" merge "$@" --max-open-bytes 8GiB --summary json > /dev/null 2> "$OUT/merge-memory.err" || true
    local rss open windows
    rss=$(tail -n 1 "$OUT/merge-memory.time")
    read -r open windows < <(python3 -c 'import json,sys
s=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(s["peak_open_bytes"], s["peak_open_windows"])' \
        "$OUT/merge-memory.err")
    python3 - "$name" "$rss" "$open" "$windows" <<'PY'
import sys
name, rss_kb, open_bytes, windows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rss = rss_kb * 1024
bound = 2 * open_bytes + 50 * 2**20
print(f"{name:<34} {rss / 2**20:>8.0f} {open_bytes / 2**20:>9.0f} {windows:>9} "
      f"{rss / max(windows, 1):>11.0f} {bound / 2**20:>9.0f}  {'within' if rss <= bound else 'OVER'}")
PY
}

printf '%-34s %8s %9s %9s %11s %9s\n' shape 'RSS MiB' 'open MiB' windows 'RSS/window' 'bound MiB'
for count in $GROUPS_LIST; do
    measure "$count groups, tumbling 1h" --group user_id --window 1h --time-field ts \
        --action merge_content "$OUT/merge-groups-$count.ndjson"
done
measure "999 x 100 KB, sliding 1h/1m" --group g --window 1h --every 1m --time-field ts \
    --action merge_content "$OUT/merge-sliding-100k.ndjson"
