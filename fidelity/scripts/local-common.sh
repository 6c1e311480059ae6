# Shared by kafka-local.sh and kube-local.sh (sourced, not run): logging, usage, the command line
# (`COMMAND [--dir DIR] [--watch-pid PID]`) and free loopback ports.
#
# The sourcing script sets `log_prefix` (`kafka-local`) and `default_dir` first, then calls
# `parse_args "$@"`, which sets `cmd`, `dir` and `watch_pid`.

log() { echo "$log_prefix: $*" >&2; }
die() { log "$*"; exit 1; }

# The sourcing script's header comment (from line 2 to `set -euo`), on stderr; exit 2.
usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[${#BASH_SOURCE[@]}-1]}" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

parse_args() {
  cmd="${1:-}"
  [ -n "$cmd" ] || usage
  shift
  dir="$default_dir"
  watch_pid=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --dir) [ $# -ge 2 ] || usage; dir="$2"; shift 2 ;;
      --watch-pid) [ $# -ge 2 ] || usage; watch_pid="$2"; shift 2 ;;
      *) usage ;;
    esac
  done
}

port_in_use() {
  (exec 2>/dev/null 3<>"/dev/tcp/127.0.0.1/$1")
}

# A port nothing listens on, below Linux's ephemeral range so that outgoing connections do not
# take it meanwhile.
free_port() {
  local p tries=0
  while [ $tries -lt 200 ]; do
    p=$((20000 + RANDOM % 12000))
    if ! port_in_use "$p"; then
      echo "$p"
      return 0
    fi
    tries=$((tries + 1))
  done
  die "no free port found in 20000-32000"
}
