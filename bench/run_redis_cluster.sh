#!/usr/bin/env bash
# idem dedup on a local 3-master Redis Cluster, against one Redis node and
# against the redis-py RedisCluster loop a user would write (issue #13).
#
#   bench/run_redis_cluster.sh [IDEM]    COUNT=1000000 PYTHON_COUNT=100000 REPEAT=3
set -euo pipefail
cd "$(dirname "$0")/.."
IDEM=${1:-build/idem}
COUNT=${COUNT:-1000000}
OUT=bench/out
mkdir -p "$OUT"
corpus="$OUT/events-$COUNT.ndjson"
if [ ! -s "$corpus" ] || [ ! -s "$corpus.truth" ]; then
    echo "generating $COUNT events into $corpus ..."
    python3 bench/gen_events.py --count "$COUNT" "$corpus" > /dev/null
fi
# The Python contender needs redis-py (Debian's python3-redis, in make deps),
# which the system interpreter has.
/usr/bin/python3 bench/redis_cluster_bench.py "$IDEM" "$corpus" \
    --python-count "${PYTHON_COUNT:-100000}" --repeat "${REPEAT:-3}"
# Redis CPU per record on every path that keeps state there (issue: speed
# against the floor, item 4).
/usr/bin/python3 bench/redis_paths.py "$IDEM" --count "${PATHS_COUNT:-100000}"
