#!/usr/bin/env bash
# Throwaway servers on loopback for the test suite: PostgreSQL and Redis (the
# shared stores) and etcd (owner leases in sharded mode).
#
#   scripts/services.sh start                         initialise and start all three on 127.0.0.1
#   scripts/services.sh restart [postgres|etcd|redis] restart one, keeping its data
#                                                     (PostgreSQL by default: the fault tests call this)
#   scripts/services.sh stop                          stop the three this script started (by the pid
#                                                     files in their data directories) and delete their data
#   scripts/services.sh env                           print the variables the tests read
#
# Each data directory is a fresh temporary directory (PostgreSQL's owned by
# the `postgres` user: that server refuses to run as root); their locations
# are kept in target/services/{pg,etcd,redis}.dir so that later calls find them.
set -euo pipefail
cd "$(dirname "$0")/.."

PG_PORT="${REPUTE_PG_PORT:-55432}"
STATE=target/services
PG_DIR_FILE="$STATE/pg.dir"
ETCD_PORT="${REPUTE_ETCD_PORT:-52379}"
ETCD_PEER_PORT="${REPUTE_ETCD_PEER_PORT:-52380}"
ETCD_DIR_FILE="$STATE/etcd.dir"
REDIS_PORT="${REPUTE_REDIS_PORT:-56379}"
REDIS_DIR_FILE="$STATE/redis.dir"

pg_bin() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
    [ -n "$dir" ] || { echo "PostgreSQL server binaries not found (apt-get install postgresql)" >&2; exit 1; }
    echo "$dir"
}

# Runs a server command as the postgres user when we are root.
as_pg() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_url() {
    echo "postgres://repute@127.0.0.1:$PG_PORT/repute"
}

pg_start() {
    local bin dir
    bin=$(pg_bin)
    mkdir -p "$STATE"
    if [ -f "$PG_DIR_FILE" ] && [ -d "$(cat "$PG_DIR_FILE")" ]; then
        dir=$(cat "$PG_DIR_FILE")
    else
        dir=$(mktemp -d /tmp/repute-pg.XXXXXX)
        chmod 755 "$dir"
        [ "$(id -u)" = 0 ] && chown postgres: "$dir"
        as_pg "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >/dev/null
        echo "$dir" >"$PG_DIR_FILE"
    fi
    if ! as_pg "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
        as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
            -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $dir -c max_connections=300 -c fsync=on" start >/dev/null
    fi
    if ! as_pg "$bin/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -tAc "select 1 from pg_roles where rolname='repute'" | grep -q 1; then
        as_pg "$bin/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -qc "create role repute login superuser" >/dev/null
        as_pg "$bin/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -qc "create database repute owner repute" >/dev/null
    fi
    echo "postgres: $(pg_url)"
}

pg_halt() {
    as_pg "$(pg_bin)/pg_ctl" -D "$1/data" -m fast -w stop >/dev/null 2>&1 || true
}

pg_stop() {
    stop "$PG_DIR_FILE" pg_halt
}

pg_restart() {
    local dir
    dir=$(cat "$PG_DIR_FILE")
    as_pg "$(pg_bin)/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m fast -w -t 60 restart >/dev/null
}

etcd_url() {
    echo "http://127.0.0.1:$ETCD_PORT"
}

# Stops the server whose pid file this script wrote: never another one that
# happens to listen on the port. TERM, then KILL after 10 s.
halt() {
    local pid
    [ -f "$1" ] || return 0
    pid=$(cat "$1")
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}

# Halts the server recorded in the file $1 with $2 and removes its data.
stop() {
    [ -f "$1" ] || return 0
    local dir
    dir=$(cat "$1")
    "$2" "$dir"
    rm -rf "$dir" "$1"
}

etcd_running() {
    [ -f "$1/etcd.pid" ] && kill -0 "$(cat "$1/etcd.pid")" 2>/dev/null
}

# Whether etcd answers its health check (plain bash: no curl or etcdctl needed).
etcd_healthy() {
    local reply
    reply=$( (exec 3<>"/dev/tcp/127.0.0.1/$ETCD_PORT" && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && cat <&3) 2>/dev/null) || return 1
    [[ "$reply" == *'"health":"true"'* ]]
}

etcd_start() {
    command -v etcd >/dev/null || { echo "etcd not found (apt-get install etcd-server)" >&2; exit 1; }
    mkdir -p "$STATE"
    local dir peer
    if [ -f "$ETCD_DIR_FILE" ] && [ -d "$(cat "$ETCD_DIR_FILE")" ]; then
        dir=$(cat "$ETCD_DIR_FILE")
    else
        dir=$(mktemp -d /tmp/repute-etcd.XXXXXX)
        echo "$dir" >"$ETCD_DIR_FILE"
    fi
    if ! etcd_running "$dir"; then
        peer="http://127.0.0.1:$ETCD_PEER_PORT"
        # Its own session, so it outlives the shell (or test) that started it.
        setsid etcd --name repute --data-dir "$dir/data" \
            --listen-client-urls "$(etcd_url)" --advertise-client-urls "$(etcd_url)" \
            --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
            --initial-cluster "repute=$peer" --logger zap --log-level warn \
            </dev/null >>"$dir/server.log" 2>&1 &
        echo $! >"$dir/etcd.pid"
    fi
    for _ in $(seq 120); do
        etcd_healthy && { echo "etcd: $(etcd_url)"; return 0; }
        etcd_running "$dir" || break
        sleep 0.25
    done
    echo "etcd did not become healthy; its log:" >&2
    tail -n 20 "$dir/server.log" >&2
    exit 1
}

etcd_halt() {
    etcd_running "$1" && halt "$1/etcd.pid"
    return 0
}

etcd_stop() {
    stop "$ETCD_DIR_FILE" etcd_halt
}

etcd_restart() {
    etcd_halt "$(cat "$ETCD_DIR_FILE")"
    etcd_start >/dev/null
}

redis_url() {
    echo "redis://127.0.0.1:$REDIS_PORT"
}

# Every write fsynced before it is acknowledged: the durability repute's
# guarantees on Redis assume (see the README).
redis_start() {
    command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install redis-server)" >&2; exit 1; }
    mkdir -p "$STATE"
    local dir
    if [ -f "$REDIS_DIR_FILE" ] && [ -d "$(cat "$REDIS_DIR_FILE")" ]; then
        dir=$(cat "$REDIS_DIR_FILE")
    else
        dir=$(mktemp -d /tmp/repute-redis.XXXXXX)
        echo "$dir" >"$REDIS_DIR_FILE"
    fi
    if ! redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then
        redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$dir" --appendonly yes --appendfsync always \
            --save "" --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/server.log" >/dev/null
    fi
    for _ in $(seq 100); do
        redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && { echo "redis: $(redis_url)"; return 0; }
        sleep 0.1
    done
    echo "redis did not start; its log:" >&2
    tail -n 20 "$dir/server.log" >&2
    exit 1
}

redis_halt() {
    halt "$1/redis.pid"
}

redis_stop() {
    stop "$REDIS_DIR_FILE" redis_halt
}

redis_restart() {
    redis_halt "$(cat "$REDIS_DIR_FILE")"
    redis_start >/dev/null
}

case "${1:-}" in
    start) pg_start; etcd_start; redis_start ;;
    restart)
        case "${2:-postgres}" in
            postgres) pg_restart ;;
            etcd) etcd_restart ;;
            redis) redis_restart ;;
            *) echo "usage: $0 restart [postgres|etcd|redis]" >&2; exit 2 ;;
        esac ;;
    stop) pg_stop; etcd_stop; redis_stop ;;
    env)
        echo "REPUTE_TEST_PG_URL=$(pg_url)"
        echo "REPUTE_TEST_ETCD_URL=$(etcd_url)"
        echo "REPUTE_TEST_REDIS_URL=$(redis_url)"
        ;;
    *) echo "usage: $0 start|restart [postgres|etcd|redis]|stop|env" >&2; exit 2 ;;
esac
