#!/usr/bin/env bash
# A real kube-apiserver and etcd on loopback, built from the Go module proxy, for fidelity's
# differential tests. No Docker and no download outside the module proxy: a wrapper module
# requires k8s.io/kubernetes (its staging modules replaced by their published versions) and
# builds cmd/kube-apiserver and a 5-line etcd main (etcdmain.Main) with CGO_ENABLED=0. The
# binaries are cached per version; Go's build cache is kept, so a rebuild takes seconds.
#
#   kube-local.sh fetch               build kube-apiserver and etcd into the cache (needs go; a cold
#                                     build takes ~15 min on 2 cores, mostly kube-apiserver)
#   kube-local.sh available           exit 0 if `start` can run without building; else print why and
#                                     exit 1 (no openssl or curl), 2 (binaries not cached; go can build them)
#                                     or 3 (binaries not cached, no go)
#   kube-local.sh start [--dir DIR] [--watch-pid PID]
#                                     build if needed, start etcd and kube-apiserver with fresh data
#                                     in DIR (absent, empty or an earlier start's: it is deleted), a
#                                     generated CA, serving certificate, service-account key and
#                                     token, wait until /readyz answers ok, and print the path of a
#                                     kubeconfig for it (DIR/kubeconfig) on stdout; DIR/etcd-url holds
#                                     etcd's client URL (for forced compaction); with --watch-pid,
#                                     both stop when process PID exits
#   kube-local.sh stop [--dir DIR]    stop the servers started in DIR (TERM, then KILL after 30 s)
#   kube-local.sh status [--dir DIR]  print the kubeconfig path and exit 0 if they run, else exit 3
#   kube-local.sh logs [--dir DIR]    print kube-apiserver's log
#
# The API server runs no controllers (like envtest): no garbage collection, namespaces stay
# Terminating, Deployments make no ReplicaSets. It compacts etcd only when asked (the compaction
# interval is 0), and Secrets are served without the watch cache (`--watch-cache-sizes=secrets#0`),
# so that a forced etcd compaction gives the 410 answers of an etcd-backed watch.
#
# Environment:
#   KUBE_VERSION             k8s.io/kubernetes version (default v1.37.2; its go.mod names the etcd)
#   KUBE_LOCAL_CACHE         where binaries are kept (default ${XDG_CACHE_HOME:-~/.cache}/simtest/kube)
#   KUBE_LOCAL_DIR           the run directory when --dir is not given (default
#                            target/fidelity/kube-local in the repository)
#   KUBE_START_TIMEOUT       seconds to wait for /readyz (default 120)
#   KUBE_APISERVER_FLAGS     extra kube-apiserver flags, appended
#   GO                       the go binary (default: go on PATH); Go 1.26 or newer for v1.37
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
version="${KUBE_VERSION:-v1.37.2}"
cache_root="${KUBE_LOCAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/simtest/kube}"
bin="$cache_root/$version/bin"
go_bin="${GO:-go}"
start_timeout="${KUBE_START_TIMEOUT:-120}"

log_prefix=kube-local
default_dir="${KUBE_LOCAL_DIR:-$repo/target/fidelity/kube-local}"
# shellcheck source=local-common.sh
. "$here/local-common.sh"
parse_args "$@"

fetch() {
  if [ -f "$bin/.complete" ]; then
    log "kube-apiserver and etcd for Kubernetes $version are cached in $bin"
    return 0
  fi
  command -v "$go_bin" >/dev/null 2>&1 || die "go is not on PATH: install Go 1.26 or newer to build kube-apiserver and etcd"
  case "$version" in
    v1.*.*) ;;
    *) die "KUBE_VERSION=$version is not a k8s.io/kubernetes release (v1.MINOR.PATCH)" ;;
  esac
  # The staging modules (k8s.io/api, k8s.io/apiserver, …) are published as v0.MINOR.PATCH.
  local staging="v0.${version#v1.}"
  local work="$cache_root/$version/module"
  mkdir -p "$work/etcd"
  export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
  log "resolving k8s.io/kubernetes@$version through the Go module proxy"
  local gomod
  gomod="$(cd "$work" && "$go_bin" mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
  [ -f "$gomod" ] || die "the module proxy gave no go.mod for k8s.io/kubernetes@$version"
  {
    echo "module local.simtest/kube-local"
    echo
    echo "go $(sed -n 's/^go \([0-9.]*\)$/\1/p' "$gomod")"
    echo
    echo "require k8s.io/kubernetes $version"
    echo
    # k8s.io/kubernetes requires its staging modules at v0.0.0 with `=> ./staging/...`: point each
    # at its published version instead.
    sed -n 's#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/src/.*$#replace \1 => \1 '"$staging"'#p' "$gomod"
  } >"$work/go.mod"
  cat >"$work/tools.go" <<'GO'
//go:build tools

// Keeps kube-apiserver's package in the module graph for `go mod tidy`.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
GO
  cat >"$work/etcd/main.go" <<'GO'
// etcd's server module has no main package: this is the etcd binary's.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$work" && "$go_bin" mod tidy >&2) || die "go mod tidy failed for k8s.io/kubernetes@$version (see above)"
  mkdir -p "$bin.partial"
  local minor="${version#v1.}"
  minor="${minor%%.*}"
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  log "building etcd"
  (cd "$work" && "$go_bin" build -trimpath -ldflags "-s -w" -o "$bin.partial/etcd" ./etcd >&2) || die "building etcd failed"
  log "building kube-apiserver $version (cold: ~15 min on 2 cores; Go's build cache makes a rebuild fast)"
  (cd "$work" && "$go_bin" build -trimpath -ldflags "$ldflags" -o "$bin.partial/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver >&2) \
    || die "building kube-apiserver failed"
  touch "$bin.partial/.complete"
  rm -rf "$bin"
  mv "$bin.partial" "$bin"
  log "cached kube-apiserver and etcd in $bin"
}

# The pid in DIR/NAME.pid, if that process still runs the binary from the cache with this DIR.
running_pid() {
  local name="$1" pid abs args
  [ -f "$dir/$name.pid" ] || return 1
  pid="$(cat "$dir/$name.pid")"
  kill -0 "$pid" 2>/dev/null || return 1
  abs="$(cd "$dir" 2>/dev/null && pwd)" || return 1
  args="$(ps -ww -o args= -p "$pid" 2>/dev/null)" || return 1
  case "$args" in
    *"$name"*"$abs"*) echo "$pid" ;;
    *) return 1 ;;
  esac
}

available() {
  command -v openssl >/dev/null 2>&1 || { echo "openssl is not on PATH: it makes the API server's certificates and keys"; exit 1; }
  command -v curl >/dev/null 2>&1 || { echo "curl is not on PATH: it asks the API server's /readyz"; exit 1; }
  [ -f "$bin/.complete" ] && return 0
  if command -v "$go_bin" >/dev/null 2>&1; then
    echo "kube-apiserver $version is not built in $bin: run $here/kube-local.sh fetch (builds it with go, ~15 min cold)"
    exit 2
  fi
  echo "kube-apiserver $version is not built in $bin and go is not on PATH: install Go 1.26+, then run $here/kube-local.sh fetch"
  exit 3
}

# Makes a CA, a serving certificate for 127.0.0.1 and localhost, a service-account key pair and a
# token in DIR.
credentials() {
  (
    cd "$dir"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=fidelity-ca" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' >apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 2 \
      -extfile apiserver.ext 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >token
    printf '%s,admin,admin,"system:masters"\n' "$(cat token)" >tokens.csv
  ) || die "making certificates and keys with openssl failed"
}

start() {
  local pid
  for name in etcd kube-apiserver; do
    if pid="$(running_pid "$name")"; then
      die "$name already runs from $dir (pid $pid): stop it first"
    fi
  done
  if [ -d "$dir" ] && [ -n "$(ls -A "$dir")" ] && [ ! -f "$dir/kubeconfig" ] && [ ! -f "$dir/tokens.csv" ]; then
    die "$dir is not empty and no earlier start made it (no kubeconfig): not deleting it; pick another --dir"
  fi
  command -v openssl >/dev/null 2>&1 || die "openssl is not on PATH"
  fetch
  local etcd_port peer_port port
  etcd_port="$(free_port)"
  peer_port="$(free_port)"
  port="$(free_port)"
  rm -rf "$dir"
  mkdir -p "$dir/etcd-data"
  dir="$(cd "$dir" && pwd)"
  credentials
  log "starting etcd on 127.0.0.1:$etcd_port"
  setsid nohup "$bin/etcd" --name fidelity --data-dir "$dir/etcd-data" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "fidelity=http://127.0.0.1:$peer_port" --unsafe-no-fsync --log-level warn \
    >"$dir/etcd.log" 2>&1 </dev/null &
  echo $! >"$dir/etcd.pid"
  echo "http://127.0.0.1:$etcd_port" >"$dir/etcd-url"
  log "starting kube-apiserver $version on https://127.0.0.1:$port"
  # shellcheck disable=SC2086
  setsid nohup "$bin/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" --cert-dir="$dir/certs" \
    --secure-port="$port" --bind-address=127.0.0.1 \
    --tls-cert-file="$dir/apiserver.crt" --tls-private-key-file="$dir/apiserver.key" \
    --service-cluster-ip-range=10.96.0.0/12 --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$dir/sa.pub" --service-account-signing-key-file="$dir/sa.key" \
    --token-auth-file="$dir/tokens.csv" --authorization-mode=RBAC --disable-admission-plugins=ServiceAccount \
    --etcd-compaction-interval=0 --watch-cache-sizes=secrets#0 ${KUBE_APISERVER_FLAGS:-} \
    >"$dir/server.log" 2>&1 </dev/null &
  local api_pid=$!
  echo "$api_pid" >"$dir/kube-apiserver.pid"
  cat >"$dir/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: fidelity
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority: $dir/ca.crt
users:
- name: admin
  user:
    token: $(cat "$dir/token")
contexts:
- name: fidelity
  context:
    cluster: fidelity
    user: admin
current-context: fidelity
KUBECONFIG
  if [ -n "$watch_pid" ]; then
    # A detached watcher: when the process that asked for the servers exits (even by a crash),
    # they go with it.
    setsid nohup bash -c '
      while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done
      if [ "$(cat "$4/kube-apiserver.pid" 2>/dev/null)" = "$2" ]; then exec "$3" stop --dir "$4"; fi
    ' _ "$watch_pid" "$api_pid" "$here/kube-local.sh" "$dir" >/dev/null 2>&1 </dev/null &
  fi
  local waited=0 token
  token="$(cat "$dir/token")"
  while [ "$(curl -s --max-time 2 --cacert "$dir/ca.crt" -H "Authorization: Bearer $token" \
    "https://127.0.0.1:$port/readyz" 2>/dev/null)" != "ok" ]; do
    if ! running_pid kube-apiserver >/dev/null || ! running_pid etcd >/dev/null; then
      tail -n 40 "$dir/etcd.log" "$dir/server.log" >&2 2>/dev/null || true
      stop
      die "etcd or kube-apiserver exited during startup (logs in $dir)"
    fi
    if [ "$waited" -ge "$((start_timeout * 5))" ]; then
      tail -n 40 "$dir/server.log" >&2 2>/dev/null || true
      stop
      die "kube-apiserver did not answer /readyz within ${start_timeout}s (logs in $dir)"
    fi
    sleep 0.2
    waited=$((waited + 1))
  done
  log "ready after ~$((waited / 5))s; stop it with: $0 stop --dir $dir"
  echo "$dir/kubeconfig"
}

stop_one() {
  local name="$1" pid waited=0
  if ! pid="$(running_pid "$name")"; then
    rm -f "$dir/$name.pid"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$waited" -ge 150 ]; then
      log "$name (pid $pid) did not stop within 30s: killing it"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.2
    waited=$((waited + 1))
  done
  rm -f "$dir/$name.pid"
  log "stopped $name (pid $pid)"
}

stop() {
  stop_one kube-apiserver
  stop_one etcd
}

status() {
  local pid
  if pid="$(running_pid kube-apiserver)" && running_pid etcd >/dev/null; then
    echo "$dir/kubeconfig"
    log "running (kube-apiserver pid $pid) from $dir"
    return 0
  fi
  log "not running (run dir $dir)"
  return 3
}

case "$cmd" in
  fetch) fetch ;;
  available) available ;;
  start) start ;;
  stop) stop ;;
  status) status ;;
  logs) cat "$dir/server.log" ;;
  *) usage ;;
esac
