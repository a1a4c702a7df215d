#!/usr/bin/env bash
# Run every cargo-fuzz target in fuzz/ one after another (one process each: CPU is shared) for
# FUZZ_RUNS executions (default 1 000 000), and print one summary line per target:
#   <target> <executions> <exec/s> <corpus units> <ok | CRASH: reproducer path>
# A crash stops that target; its reproducer and stack are in $FUZZ_WORK/<target>.log.
#
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
#   FUZZ_RUNS=1000000            executions per target
#   FUZZ_TARGETS="a b"           a subset (default: every target in fuzz/Cargo.toml)
#   FUZZ_MAX_SECONDS=0           stop a target after this long whatever its count (0: no limit)
#   FUZZ_SANITIZER=address       address | none (none is about twice as fast)
#   FUZZ_MAX_LEN=4096            longest input (line_reader always gets 16 KiB: its limits start above 4 KiB)
#   FUZZ_WORK=/var/tmp/mcpferry-fuzz   grown corpora, crash reproducers and logs
#   FUZZ_TARGET_DIR=$FUZZ_WORK/target  build artifacts
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
runs="${FUZZ_RUNS:-1000000}"
max_seconds="${FUZZ_MAX_SECONDS:-0}"
sanitizer="${FUZZ_SANITIZER:-address}"
work="${FUZZ_WORK:-/var/tmp/mcpferry-fuzz}"
target_dir="${FUZZ_TARGET_DIR:-$work/target}"
targets="${FUZZ_TARGETS:-$(sed -n 's/^name = "\(.*\)"$/\1/p' "$root/fuzz/Cargo.toml" | grep -v '^mcpferry-fuzz$')}"
mkdir -p "$work"
cd "$root/fuzz"

cargo +nightly fuzz build --sanitizer "$sanitizer" --target-dir "$target_dir" >"$work/build.log" 2>&1 || {
  echo "fuzz build failed: see $work/build.log" >&2
  tail -20 "$work/build.log" >&2
  exit 2
}

# The line framer's limits start above the 4 KiB head it keeps of an oversized line: it needs longer inputs.
max_len_for() {
  case "$1" in
    line_reader) echo 16384 ;;
    *) echo "${FUZZ_MAX_LEN:-4096}" ;;
  esac
}

status=0
printf '%-14s %12s %9s %9s  %s\n' target executions 'exec/s' new-units result
for target in $targets; do
  corpus="$work/corpus/$target"
  artifacts="$work/artifacts/$target/"
  log="$work/$target.log"
  mkdir -p "$corpus" "$artifacts"
  cargo +nightly fuzz run "$target" --sanitizer "$sanitizer" --target-dir "$target_dir" "$corpus" "$root/fuzz/seeds/$target" -- \
    -runs="$runs" -max_total_time="$max_seconds" -max_len="$(max_len_for "$target")" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts" >"$log" 2>&1
  code=$?
  executions="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  speed="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
  units="$(sed -n 's/^stat::new_units_added: *//p' "$log" | tail -1)"
  reproducer="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)"
  if [ "$code" -eq 0 ]; then
    result=ok
  else
    result="CRASH: ${reproducer:-see $log}"
    status=1
  fi
  printf '%-14s %12s %9s %9s  %s\n' "$target" "${executions:-?}" "${speed:-?}" "${units:-?}" "$result"
done
exit "$status"
