#!/usr/bin/env bash
# Runs every libFuzzer target of a `make fuzz` build for a bounded time,
# with memory limits: a crash, a leak, an input slower than -timeout or a
# run whose RSS passes -rss_limit_mb (or one allocation past
# -malloc_limit_mb) fails it, and the input that did it is printed.
#
#   fuzz/run.sh BUILD_DIR SECONDS_PER_TARGET
#
# Each target starts from its seed corpus (fuzz/corpus/TARGET, read only) in
# a scratch corpus of its own, so what a run finds is not written into the
# tree; keep an input that found a bug under fuzz/corpus/TARGET, where the
# replay tests of `make test` run it from then on.
set -euo pipefail
build=$(cd "${1:?usage: fuzz/run.sh BUILD_DIR SECONDS_PER_TARGET}" && pwd)
seconds=${2:?usage: fuzz/run.sh BUILD_DIR SECONDS_PER_TARGET}
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

seeds_of() {
  case $1 in
    fuzz_record) echo "$here/../samples/captures" ;;
    fuzz_har) echo "$here/../samples/captures" ;;
    fuzz_http) echo "$here/../samples/http" ;;
    *) echo "$here/corpus/${1#fuzz_}" ;;
  esac
}

failed=0
for target in fuzz_input fuzz_json_elements fuzz_csv fuzz_specs fuzz_keys fuzz_jwt fuzz_record fuzz_har \
  fuzz_http; do
  mkdir -p "$scratch/$target"
  log="$scratch/$target.log"
  echo "fuzz/run.sh: $target for ${seconds}s"
  # -rss_limit_mb: the whole process (ASan's shadow included);
  # -malloc_limit_mb: one allocation, as a budget says what one input may
  # make idem hold.
  if ! (cd "$scratch" && ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 \
        "$build/fuzz/$target" -max_total_time="$seconds" -rss_limit_mb=2048 \
        -malloc_limit_mb=512 -timeout=10 -print_final_stats=1 \
        "$scratch/$target" "$(seeds_of "$target")" > "$log" 2>&1); then
    failed=1
    tail -n 60 "$log"
    for artifact in "$scratch"/crash-* "$scratch"/leak-* "$scratch"/timeout-* "$scratch"/oom-*; do
      [ -e "$artifact" ] || continue
      echo "fuzz/run.sh: $target: $(basename "$artifact"), base64:"
      base64 -w 0 "$artifact" | head -c 4096
      echo
    done
  else
    grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' "$log" | tr '\n' ' '
    echo
  fi
done
exit "$failed"
