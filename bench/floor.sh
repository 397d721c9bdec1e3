# The parse floor (bench/parse_floor.cpp) beside a command, for the
# benchmark scripts (sourced): `floor_fraction NAME FILE THREADS -- CMD...`
# runs the floor and CMD in turn REPEAT times on FILE and prints
#   NAME  CMD's median seconds  the floor's median seconds  floor / CMD
# (1.0: the command costs what parsing every record costs). The floor reads
# FLOOR_KEYS (default data.object.id,type): the fields the command reads.
ensure_floor() {
    FLOOR=${FLOOR:-build/parse_floor}
    [ -x "$FLOOR" ] || cmake --build build --target parse_floor > /dev/null
}

floor_fraction() {
    local name=$1 file=$2 threads=$3
    shift 4 # the name, the file, the threads and the --
    ensure_floor
    local times floors
    times=$(mktemp)
    floors=$(mktemp)
    for _ in $(seq "${REPEAT:-3}"); do
        "$FLOOR" "$file" --threads "$threads" --keys "${FLOOR_KEYS:-data.object.id,type}" | python3 -c 'import json, sys; print(json.load(sys.stdin)["seconds"])' >> "$floors"
        /usr/bin/time -f '%e' -o "$times.one" "$@" > /dev/null 2>&1 || true
        tail -n 1 "$times.one" >> "$times"
    done
    python3 - "$name" "$times" "$floors" <<'PY'
import statistics, sys
name = sys.argv[1]
command = statistics.median(float(x) for x in open(sys.argv[2]))
floor = statistics.median(float(x) for x in open(sys.argv[3]))
print(f"{name:34} {command:6.2f} s   parse floor {floor:5.2f} s   fraction of the floor {floor / command:4.2f}")
PY
    rm -f "$times" "$times.one" "$floors"
}
