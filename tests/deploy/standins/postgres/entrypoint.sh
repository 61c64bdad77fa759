#!/bin/sh
# The part of the official image's docker-entrypoint.sh that compose.yaml uses: on an empty
# data volume, initdb with POSTGRES_USER as the superuser and POSTGRES_PASSWORD as its
# password, then POSTGRES_DB; then the server, listening on every address.
set -eu
if [ "${1:-}" != postgres ]; then exec "$@"; fi
shift
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "docker-entrypoint.sh: POSTGRES_PASSWORD is not set" >&2
    exit 1
  fi
  pwfile="$(mktemp)"
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    # single-user mode, as the bootstrap superuser: nothing listens before the database exists
    printf 'CREATE DATABASE "%s";\n' "$db" | postgres --single -D "$PGDATA" -j postgres >/dev/null
  fi
  echo "docker-entrypoint.sh: initialised $PGDATA (user $user, database $db)" >&2
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
