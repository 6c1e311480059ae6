#!/usr/bin/env bash
# Lints the GitHub Actions workflows in .github/workflows with actionlint, since they cannot run
# here: their syntax, job graph (`needs`), expressions and contexts (`matrix`, `needs.*.outputs`,
# `inputs`), the inputs of well-known actions (actions/checkout, upload-artifact, …), and
# runner labels. It runs shellcheck on every `run:` script too when shellcheck is on PATH (it is
# not required: without it those scripts are not checked).
#
# actionlint is built from the Go module proxy once (needs go) into ~/.cache/simtest/bin, and
# reused while its version matches.
#
#   .ci/actionlint.sh            lint every workflow
#   .ci/actionlint.sh FILE...    lint these files (paths relative to the current directory)
#
# Environment:
#   ACTIONLINT_VERSION   the version to install (default v1.7.12)
#   SIMTEST_BIN          where it is installed (default ${XDG_CACHE_HOME:-~/.cache}/simtest/bin)
#   GO                   the go binary (default: go on PATH)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"

version="${ACTIONLINT_VERSION:-v1.7.12}"
bin_dir="${SIMTEST_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/simtest/bin}"
actionlint="$bin_dir/actionlint"
go_bin="${GO:-go}"

installed_version() {
  [ -x "$actionlint" ] && "$actionlint" -version 2>/dev/null | head -n1
}

if [ "$(installed_version || true)" != "$version" ]; then
  command -v "$go_bin" >/dev/null 2>&1 || {
    echo "actionlint: go is not on PATH: install Go to build actionlint $version from the module proxy" >&2
    exit 1
  }
  echo "actionlint: installing $version into $bin_dir from the Go module proxy" >&2
  mkdir -p "$bin_dir"
  GOBIN="$bin_dir" GOFLAGS='' "$go_bin" install "github.com/rhysd/actionlint/cmd/actionlint@$version"
  [ "$(installed_version || true)" = "$version" ] || {
    echo "actionlint: $actionlint does not report version $version after installing it" >&2
    exit 1
  }
fi

if command -v shellcheck >/dev/null 2>&1; then
  echo "actionlint $version, with $(shellcheck --version | sed -n 's/^version: /shellcheck /p') on the run: scripts" >&2
else
  echo "actionlint $version (shellcheck is not on PATH: run: scripts are not shellchecked)" >&2
fi

if [ $# -gt 0 ]; then
  exec "$actionlint" "$@"
fi
cd "$repo"
shopt -s nullglob
workflows=(.github/workflows/*.yml .github/workflows/*.yaml)
[ ${#workflows[@]} -gt 0 ] || { echo "actionlint: no workflow in .github/workflows" >&2; exit 1; }
exec "$actionlint" "${workflows[@]}"
