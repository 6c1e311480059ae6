#!/usr/bin/env bash
# Builds one libFuzzer target of fuzz/ on the stable toolchain and runs it for a bounded time.
#
#   fuzz/run.sh TARGET SECONDS [libFuzzer args...]
#   fuzz/run.sh two_phase_commit_buggy 30
#   fuzz/run.sh shoppingcart_non_atomic_idempotency 60 -seed=1
#
# Coverage: rustc's SanitizerCoverage pass through stable `-C` flags (the ones `cargo fuzz build
# -s none` passes), no sanitizer (AddressSanitizer needs nightly's -Z). Built with --target so the
# flags skip build scripts and proc macros. RUSTFLAGS replaces the repository's
# .cargo/config.toml rustflags, so `--cfg tokio_unstable` is repeated here.
# Working corpus: fuzz/corpus/TARGET (kept between runs); crashes: fuzz/artifacts/TARGET/.
# Not --locked: fuzz/Cargo.lock pins the versions, but a path crate (sim, walkthroughs) that gains a
# dependency adds a line to it, as in the main workspace.
# Exit status: 0 when the run ended without a crash, libFuzzer's (non-zero) when it found one.
# FUZZ_EXPECT_CRASH=1 inverts that for a target with a planted bug (CI: the bug must be found).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: fuzz/run.sh TARGET SECONDS [libFuzzer args...]" >&2
  exit 2
fi
target=$1
seconds=$2
shift 2
cd "$(dirname "$0")"
triple=$(rustc -vV | sed -n 's/^host: //p')
features=()
case "$target" in
  two_phase_commit_*) ;;
  *) features=(--features walkthroughs) ;;
esac
export RUSTFLAGS="--cfg tokio_unstable --cfg fuzzing -Cdebug-assertions -Coverflow-checks \
-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cllvm-args=-sanitizer-coverage-stack-depth \
-Cllvm-args=-simplifycfg-branch-fold-threshold=0"
build_started=$SECONDS
cargo build --release --target "$triple" --bin "$target" "${features[@]}"
echo "fuzz/run.sh: built $target in $((SECONDS - build_started)) s" >&2
mkdir -p "corpus/$target" "artifacts/$target"
status=0
"target/$triple/release/$target" "corpus/$target" -artifact_prefix="artifacts/$target/" \
  -max_total_time="$seconds" -print_final_stats=1 "$@" || status=$?
if [ "${FUZZ_EXPECT_CRASH:-0}" = 1 ]; then
  if [ "$status" = 0 ]; then
    echo "fuzz/run.sh: $target: no crash in $seconds s, but its planted bug was expected" >&2
    exit 1
  fi
  echo "fuzz/run.sh: $target: crashed as expected (exit $status)" >&2
  exit 0
fi
exit "$status"
