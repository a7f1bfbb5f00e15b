# Throwaway PostgreSQL and Redis on 127.0.0.1 with their data in a temporary directory.
# Source this file, then call `services_start`; `services_stop` (also run on EXIT) removes them.
# Exports DATABASE_URL and CELERY_BROKER_URL. Needs Debian's postgresql and redis-server.

services_install() {
  local missing=()
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing ${missing[*]} from Debian's packages"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

_as_pg_user() {
  # initdb and postgres refuse to run as root; Debian's package makes a postgres user.
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

services_start() {
  local pg_bin
  pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  SERVICES_DIR=$(mktemp -d /tmp/quire-services.XXXXXX)
  chmod 755 "$SERVICES_DIR"
  mkdir -p "$SERVICES_DIR/pg" "$SERVICES_DIR/redis"
  [ "$(id -u)" = 0 ] && chown postgres "$SERVICES_DIR/pg"
  PG_PORT=$(_free_port)
  REDIS_PORT=$(_free_port)
  _as_pg_user "$pg_bin/initdb" -D "$SERVICES_DIR/pg/data" -U quire --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
  _as_pg_user "$pg_bin/pg_ctl" -D "$SERVICES_DIR/pg/data" -l "$SERVICES_DIR/pg/log" -w \
    -o "-h 127.0.0.1 -p $PG_PORT -k $SERVICES_DIR/pg -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 -c shared_buffers=256MB -c max_wal_size=8GB -c checkpoint_timeout=30min" \
    start >/dev/null
  _as_pg_user "$pg_bin/createdb" -h 127.0.0.1 -p "$PG_PORT" -U quire quire
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$SERVICES_DIR/redis" --save "" --appendonly no \
    --daemonize yes --pidfile "$SERVICES_DIR/redis/redis.pid" --logfile "$SERVICES_DIR/redis/log"
  for _ in $(seq 1 50); do
    redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  export DATABASE_URL="postgres://quire@127.0.0.1:$PG_PORT/quire"
  export CELERY_BROKER_URL="redis://127.0.0.1:$REDIS_PORT/0"
  SERVICES_PG_BIN=$pg_bin
  echo "PostgreSQL on 127.0.0.1:$PG_PORT, Redis on 127.0.0.1:$REDIS_PORT (data in $SERVICES_DIR)"
}

services_stop() {
  [ -n "${SERVICES_DIR:-}" ] || return 0
  if [ -f "$SERVICES_DIR/redis/redis.pid" ]; then
    kill "$(cat "$SERVICES_DIR/redis/redis.pid")" 2>/dev/null || true
  fi
  if [ -d "$SERVICES_DIR/pg/data" ]; then
    _as_pg_user "$SERVICES_PG_BIN/pg_ctl" -D "$SERVICES_DIR/pg/data" -m immediate stop >/dev/null 2>&1 || true
  fi
  rm -rf "$SERVICES_DIR"
  SERVICES_DIR=""
}
