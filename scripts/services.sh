#!/usr/bin/env bash
# Throwaway database servers on loopback for the test suite.
#
#   scripts/services.sh start     initialise and start PostgreSQL on 127.0.0.1
#   scripts/services.sh restart   restart it (the fault tests call this)
#   scripts/services.sh stop      stop it and delete its data
#   scripts/services.sh env       print the variables the tests read
#
# The data directory is a fresh temporary directory owned by the `postgres`
# user (the server refuses to run as root); its location is kept in
# target/services/pg.dir so that later calls find it.
set -euo pipefail
cd "$(dirname "$0")/.."

PG_PORT="${REPUTE_PG_PORT:-55432}"
STATE=target/services
PG_DIR_FILE="$STATE/pg.dir"

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

pg_stop() {
    [ -f "$PG_DIR_FILE" ] || return 0
    local dir
    dir=$(cat "$PG_DIR_FILE")
    as_pg "$(pg_bin)/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir" "$PG_DIR_FILE"
}

pg_restart() {
    local dir
    dir=$(cat "$PG_DIR_FILE")
    as_pg "$(pg_bin)/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m fast -w -t 60 restart >/dev/null
}

case "${1:-}" in
    start) pg_start ;;
    restart) pg_restart ;;
    stop) pg_stop ;;
    env) echo "REPUTE_TEST_PG_URL=$(pg_url)" ;;
    *) echo "usage: $0 start|restart|stop|env" >&2; exit 2 ;;
esac
