#!/usr/bin/env bash
# A real Apache Kafka broker on loopback, from Maven Central jars, for fidelity's differential
# tests: one KRaft process that is both broker and controller (node 1), every replication factor
# 1, `group.initial.rebalance.delay.ms=0`, retention checked every second (`log.initial.task.delay.ms`
# and `log.retention.check.interval.ms` 1000, so the retention scenarios need not wait 5 min), and
# the log cleaner looking for dirty logs every second (`log.cleaner.backoff.ms` 1000, not 15 s).
#
#   kafka-local.sh fetch               resolve the broker's jars into the cache (needs mvn)
#   kafka-local.sh available           exit 0 if `start` can run without downloading; else print why
#                                      and exit 1 (no Java 17+), 2 (jars not cached; mvn can fetch
#                                      them) or 3 (jars not cached, no mvn)
#   kafka-local.sh start [--dir DIR] [--watch-pid PID]
#                                      fetch if needed, format fresh KRaft storage in DIR (absent,
#                                      empty or an earlier start's: it is deleted), start the
#                                      broker, wait until it answers a Metadata request, print its
#                                      bootstrap address (127.0.0.1:PORT) on stdout; with
#                                      --watch-pid, the broker is stopped when process PID exits
#   kafka-local.sh stop [--dir DIR]    stop the broker started in DIR (TERM, then KILL after 30 s); a
#                                      pid file whose process is not that broker is stale: ignored
#   kafka-local.sh status [--dir DIR]  print the bootstrap address and exit 0 if it runs, else exit 3
#   kafka-local.sh logs [--dir DIR]    print the broker's log
#
# Environment:
#   KAFKA_VERSION        Apache Kafka version (default 4.2.0; any 4.x)
#   KAFKA_LOCAL_CACHE    where jars are kept (default ${XDG_CACHE_HOME:-~/.cache}/simtest/kafka);
#                        first run downloads, later runs reuse it
#   KAFKA_LOCAL_DIR      the run directory when --dir is not given (default target/fidelity/kafka-local
#                        in the repository): config, data, pid, server.log
#   KAFKA_START_TIMEOUT  seconds to wait for the broker to answer (default 120)
#   KAFKA_HEAP_OPTS      JVM heap options (default -Xms256m -Xmx1g)
#   JAVA                 the java binary (default: java on PATH); Java 17 or newer
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
version="${KAFKA_VERSION:-4.2.0}"
cache_root="${KAFKA_LOCAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/simtest/kafka}"
libs="$cache_root/$version/libs"
java_bin="${JAVA:-java}"
start_timeout="${KAFKA_START_TIMEOUT:-120}"

log_prefix=kafka-local
default_dir="${KAFKA_LOCAL_DIR:-$repo/target/fidelity/kafka-local}"
# shellcheck source=local-common.sh
. "$here/local-common.sh"
parse_args "$@"

fetch() {
  if [ -f "$libs/.complete" ]; then
    log "jars for Kafka $version are cached in $libs"
    return 0
  fi
  command -v mvn >/dev/null 2>&1 || die "mvn is not on PATH: install Maven (apt-get install maven) to fetch Kafka's jars"
  log "resolving org.apache.kafka:kafka_2.13:$version and its runtime dependencies from Maven Central"
  local work
  work="$(mktemp -d)"
  # A throwaway pom whose only dependency is the broker: Maven resolves the runtime closure.
  cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.simtest.fidelity</groupId>
  <artifactId>kafka-broker-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$version</version>
    </dependency>
  </dependencies>
</project>
POM
  rm -rf "$libs.partial"
  mkdir -p "$libs.partial"
  mvn -q -B -Dstyle.color=never -f "$work/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$libs.partial" >&2 || die "mvn could not resolve Kafka $version"
  # The broker logs through SLF4J; Kafka 4 ships log4j2, so bind SLF4J to it (the 1.x or the 2.x
  # binding, whichever matches the slf4j-api that Kafka brought).
  local slf4j log4j binding
  slf4j="$(find "$libs.partial" -name 'slf4j-api-*.jar' -printf '%f\n' | sed 's/^slf4j-api-//; s/\.jar$//' | head -n1)"
  log4j="$(find "$libs.partial" -name 'log4j-core-*.jar' -printf '%f\n' | sed 's/^log4j-core-//; s/\.jar$//' | head -n1)"
  [ -n "$slf4j" ] && [ -n "$log4j" ] || die "Kafka $version brought no slf4j-api or log4j-core: cannot pick an SLF4J binding"
  case "$slf4j" in
    1.*) binding=log4j-slf4j-impl ;;
    *) binding=log4j-slf4j2-impl ;;
  esac
  log "binding slf4j-api $slf4j to log4j $log4j ($binding)"
  mvn -q -B -Dstyle.color=never -f "$work/pom.xml" dependency:copy \
    -Dartifact="org.apache.logging.log4j:$binding:$log4j" -DoutputDirectory="$libs.partial" >&2 \
    || die "mvn could not resolve $binding $log4j"
  touch "$libs.partial/.complete"
  rm -rf "$libs"
  mv "$libs.partial" "$libs"
  rm -rf "$work"
  log "cached $(find "$libs" -name '*.jar' | wc -l) jars in $libs"
}

# Sends a Metadata v4 request (all topics) and checks that a response with the same correlation
# id comes back: the broker is serving clients, not only listening.
answers_metadata() {
  local port="$1" got
  got="$(
    exec 2>/dev/null
    exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
    # size 23 | api key 3 | version 4 | correlation 42 | client id "fidelity" | topics null | no auto-create
    printf '\x00\x00\x00\x17\x00\x03\x00\x04\x00\x00\x00\x2a\x00\x08fidelity\xff\xff\xff\xff\x00' >&3
    timeout 5 head -c 8 <&3 | od -An -tx1 | tr -d ' \n'
  )" || return 1
  [ "${got:8:8}" = "0000002a" ]
}

running_pid() {
  [ -f "$dir/kafka.pid" ] || return 1
  local pid abs args
  pid="$(cat "$dir/kafka.pid")"
  kill -0 "$pid" 2>/dev/null || return 1
  # A pid file outlives its broker (a kill -9, a reboot) and its pid may since name another
  # process: only the broker started with this directory's server.properties counts.
  abs="$(cd "$dir" 2>/dev/null && pwd)" || return 1
  args="$(ps -ww -o args= -p "$pid" 2>/dev/null)" || return 1
  case "$args" in
    *kafka.Kafka*"$abs/server.properties"*) echo "$pid" ;;
    *) return 1 ;;
  esac
}

# Why no java runs: $JAVA names a missing binary, or java is not on PATH.
no_java() {
  if [ -n "${JAVA:-}" ]; then
    echo "JAVA=$JAVA is not an executable: point it at a Java 17 or newer binary, or unset it to use java on PATH"
  else
    echo "java is not on PATH: install Java 17 or newer (apt-get install openjdk-17-jre-headless)"
  fi
}

available() {
  local major
  if ! command -v "$java_bin" >/dev/null 2>&1; then
    echo "$(no_java)"
    exit 1
  fi
  major="$("$java_bin" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)"
  if [ -z "$major" ] || [ "$major" -lt 17 ]; then
    echo "$java_bin is Java ${major:-of an unknown version}; Kafka $version needs Java 17 or newer"
    exit 1
  fi
  [ -f "$libs/.complete" ] && return 0
  if command -v mvn >/dev/null 2>&1; then
    echo "Kafka $version's jars are not cached in $libs: run $here/kafka-local.sh fetch (uses mvn)"
    exit 2
  fi
  echo "Kafka $version's jars are not cached in $libs and mvn is not on PATH: install Maven, then run $here/kafka-local.sh fetch"
  exit 3
}

start() {
  if pid="$(running_pid)"; then
    die "a broker already runs from $dir (pid $pid, $(cat "$dir/bootstrap" 2>/dev/null)): stop it first"
  fi
  # The directory is deleted and made afresh: never one that an earlier start did not make.
  if [ -d "$dir" ] && [ -n "$(ls -A "$dir")" ] && [ ! -f "$dir/server.properties" ]; then
    die "$dir is not empty and no earlier start made it (no server.properties): not deleting it; pick another --dir"
  fi
  command -v "$java_bin" >/dev/null 2>&1 || die "$(no_java)"
  fetch
  local port controller_port cluster_id
  port="$(free_port)"
  controller_port="$(free_port)"
  while [ "$controller_port" = "$port" ]; do controller_port="$(free_port)"; done
  rm -rf "$dir"
  mkdir -p "$dir/data"
  dir="$(cd "$dir" && pwd)"
  cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller_port
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller_port
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.initial.task.delay.ms=1000
log.retention.check.interval.ms=1000
log.cleaner.backoff.ms=1000
auto.create.topics.enable=true
delete.topic.enable=true
PROPS
  cat >"$dir/log4j2.properties" <<LOG4J
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $dir/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = INFO
LOG4J
  # A random KRaft cluster id: 16 bytes, URL-safe base64 without padding (Kafka's Uuid format).
  # Like Kafka's Uuid.randomUuid, never one starting with '-': the storage tool would read it as
  # an option ("argument --cluster-id/-t: expected one argument"), one start in 64.
  cluster_id="-"
  while [ "${cluster_id#-}" != "$cluster_id" ]; do
    cluster_id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
  done
  local jvm=("$java_bin" -cp "$libs/*" "-Dlog4j2.configurationFile=$dir/log4j2.properties" -Djava.awt.headless=true)
  log "formatting KRaft storage in $dir/data (cluster $cluster_id)"
  "${jvm[@]}" kafka.tools.StorageTool format -t "$cluster_id" -c "$dir/server.properties" \
    >"$dir/format.log" 2>&1 || { cat "$dir/format.log" >&2; die "formatting storage failed"; }
  log "starting Kafka $version on 127.0.0.1:$port (controller on $controller_port)"
  # shellcheck disable=SC2086
  setsid nohup "${jvm[@]}" ${KAFKA_HEAP_OPTS:--Xms256m -Xmx1g} -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    kafka.Kafka "$dir/server.properties" >"$dir/stdout.log" 2>&1 </dev/null &
  local kafka_pid=$!
  echo "$kafka_pid" >"$dir/kafka.pid"
  echo "127.0.0.1:$port" >"$dir/bootstrap"
  if [ -n "$watch_pid" ]; then
    # A detached watcher: when the process that asked for the broker exits (even by a crash, which
    # runs no destructor), the broker goes with it.
    setsid nohup bash -c '
      while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done
      if kill -0 "$2" 2>/dev/null && [ "$(cat "$4/kafka.pid" 2>/dev/null)" = "$2" ]; then exec "$3" stop --dir "$4"; fi
    ' _ "$watch_pid" "$kafka_pid" "$here/kafka-local.sh" "$dir" >/dev/null 2>&1 </dev/null &
  fi
  local waited=0
  while ! answers_metadata "$port"; do
    if ! running_pid >/dev/null; then
      tail -n 40 "$dir/server.log" "$dir/stdout.log" >&2 2>/dev/null || true
      die "the broker exited during startup (logs in $dir)"
    fi
    if [ "$waited" -ge "$((start_timeout * 5))" ]; then
      tail -n 40 "$dir/server.log" >&2 2>/dev/null || true
      stop
      die "the broker did not answer within ${start_timeout}s (logs in $dir)"
    fi
    sleep 0.2
    waited=$((waited + 1))
  done
  log "ready after ~$((waited / 5))s; stop it with: $0 stop --dir $dir"
  echo "127.0.0.1:$port"
}

stop() {
  local pid
  if ! pid="$(running_pid)"; then
    log "no broker runs from $dir"
    rm -f "$dir/kafka.pid"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  local waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$waited" -ge 150 ]; then
      log "the broker (pid $pid) did not stop within 30s: killing it"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.2
    waited=$((waited + 1))
  done
  rm -f "$dir/kafka.pid"
  log "stopped the broker (pid $pid)"
}

status() {
  local pid
  if pid="$(running_pid)"; then
    echo "$(cat "$dir/bootstrap")"
    log "running (pid $pid) from $dir"
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
