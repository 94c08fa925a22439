#!/usr/bin/env bash
# with-redis.sh CMD...: runs CMD with a throwaway standalone Redis and a
# three-master Redis Cluster on free loopback ports, then stops both.
#
# It installs redis-server from Debian packages when missing, and exports
#   SHIELD_TEST_REDIS_URL      redis://127.0.0.1:PORT/0 (standalone)
#   SHIELD_TEST_REDIS_CLUSTER  host:port,host:port,host:port (cluster seeds)
#   SHIELD_TEST_REDIS_SENTINEL host:port of a Sentinel watching master "shieldmaster"
# for the Go tests (internal/testredis reads them).
set -euo pipefail

if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  echo "with-redis: installing redis-server from Debian packages" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq redis-server >/dev/null
fi

dir=$(mktemp -d /tmp/shield-redis.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# A port whose cluster bus port (+10000) is free too. Both lie below the
# kernel's ephemeral range (32768 and up), where the client sockets of a
# busy test run land: a bus port up there was taken now and then between
# the check and redis-server's bind.
pick_port() {
  local p
  for _ in $(seq 1 200); do
    p=$(( (RANDOM % 2700) + 20000 ))
    if port_free "$p" && port_free $((p + 10000)); then echo "$p"; return; fi
  done
  echo "with-redis: no free port" >&2; exit 1
}

# start_redis [extra args...]: starts redis-server on a free port (another
# one if the bind loses a race) and sets $port; "@DIR@" in the arguments
# is the server's own directory.
start_redis() {
  local try pid
  for try in 1 2 3 4 5; do
    port=$(pick_port)
    mkdir -p "$dir/$port"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --dir "$dir/$port" --logfile "$dir/$port/redis.log" "${@//@DIR@/$dir/$port}" &
    pid=$!
    pids+=($pid)
    for _ in $(seq 1 100); do
      redis-cli -p "$port" ping >/dev/null 2>&1 && return
      kill -0 "$pid" 2>/dev/null || break # it exited: the bind failed
      sleep 0.1
    done
    echo "with-redis: redis on port $port did not start (try $try):" >&2
    tail -3 "$dir/$port/redis.log" >&2
    kill "$pid" 2>/dev/null || true
  done
  exit 1
}

start_redis
standalone=$port

cluster=()
for _ in 1 2 3; do
  start_redis --cluster-enabled yes --cluster-config-file @DIR@/nodes.conf --cluster-node-timeout 2000
  cluster+=("127.0.0.1:$port")
done
redis-cli --cluster create "${cluster[@]}" --cluster-replicas 0 --cluster-yes >"$dir/cluster-create.log" 2>&1 || {
  cat "$dir/cluster-create.log" >&2; exit 1; }
# Every node must say ok: the first one may before the others have heard
# of every slot (a test then gets CLUSTERDOWN from them for a moment).
for node in "${cluster[@]}"; do
  nport=${node##*:}
  for _ in $(seq 1 100); do
    redis-cli -p "$nport" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && break
    sleep 0.1
  done
  redis-cli -p "$nport" cluster info | grep -q 'cluster_state:ok' || { echo "with-redis: cluster node $node not ok" >&2; exit 1; }
done

# A master watched by one Sentinel (clients find the master through it).
start_redis
sentinel_master=$port
sentinel=$(pick_port)
mkdir -p "$dir/$sentinel"
cat > "$dir/$sentinel/sentinel.conf" <<CONF
port $sentinel
bind 127.0.0.1
dir $dir/$sentinel
sentinel monitor shieldmaster 127.0.0.1 $sentinel_master 1
sentinel down-after-milliseconds shieldmaster 5000
CONF
redis-server "$dir/$sentinel/sentinel.conf" --sentinel --logfile "$dir/$sentinel/sentinel.log" &
pids+=($!)
for _ in $(seq 1 100); do
  redis-cli -p "$sentinel" sentinel get-master-addr-by-name shieldmaster 2>/dev/null | grep -q "$sentinel_master" && break
  sleep 0.1
done
redis-cli -p "$sentinel" sentinel get-master-addr-by-name shieldmaster | grep -q "$sentinel_master" || {
  echo "with-redis: sentinel did not come up" >&2; cat "$dir/$sentinel/sentinel.log" >&2; exit 1; }

export SHIELD_TEST_REDIS_URL="redis://127.0.0.1:$standalone/0"
export SHIELD_TEST_REDIS_SENTINEL="127.0.0.1:$sentinel"
export SHIELD_TEST_REDIS_CLUSTER=$(IFS=,; echo "${cluster[*]}")
echo "with-redis: standalone $SHIELD_TEST_REDIS_URL, cluster $SHIELD_TEST_REDIS_CLUSTER, sentinel $SHIELD_TEST_REDIS_SENTINEL" >&2
"$@"
