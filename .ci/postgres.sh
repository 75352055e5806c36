#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests of the baseline database's PostgreSQL path.
#
#   source .ci/postgres.sh          # starts it (or reuses a running one) and exports
#                                   # PERFMODEL_TEST_POSTGRES_URL=postgresql+psycopg://...
#   eval "$(bash .ci/postgres.sh)"  # the same from a child shell (prints the export line)
#   bash .ci/postgres.sh stop       # stops it and removes its files
#
# Installs Debian's postgresql package with apt-get when no server binaries are found (needs
# root), runs the server as a non-root user (the 'postgres' user when it exists, else a system
# user 'perfmodel-pg'; the current user when not root), in $PERFMODEL_PG_DIR (default
# /tmp/perfmodel-pg), listening on 127.0.0.1 on a free port, trust authentication, database
# 'perfmodel_test'.  Idempotent: a server it started before and that still answers is reused.
# Safe to source from a 'set -euo pipefail' script: it changes no option and never exits the
# caller; it returns non-zero on failure.

_perfmodel_pg_log() { echo "postgres.sh: $*" >&2; }

_perfmodel_pg_bindir() {
    local dir found=""
    for dir in /usr/lib/postgresql/*/bin; do  # Debian's layout; the newest version wins
        if [ -x "$dir/pg_ctl" ] && [ -x "$dir/initdb" ]; then
            found=$(printf '%s\n%s\n' "$found" "$dir" | sort -V | tail -n 1)
        fi
    done
    if [ -n "$found" ]; then
        echo "$found"
    elif command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(readlink -f "$(command -v pg_ctl)")"
    fi
}

_perfmodel_pg_as() {  # run a command as the server's user
    if [ "$(id -u)" = 0 ]; then
        runuser -u "$_PERFMODEL_PG_USER" -- "$@"
    else
        "$@"
    fi
}

_perfmodel_pg_main() {
    local dir="${PERFMODEL_PG_DIR:-/tmp/perfmodel-pg}" bin port url
    if [ "$(id -u)" = 0 ]; then
        if id postgres >/dev/null 2>&1; then
            _PERFMODEL_PG_USER=postgres
        else
            _PERFMODEL_PG_USER=perfmodel-pg
            id "$_PERFMODEL_PG_USER" >/dev/null 2>&1 ||
                useradd --system --no-create-home --shell /usr/sbin/nologin "$_PERFMODEL_PG_USER" ||
                { _perfmodel_pg_log "cannot create user $_PERFMODEL_PG_USER"; return 1; }
        fi
    else
        _PERFMODEL_PG_USER=$(id -un)
    fi

    bin=$(_perfmodel_pg_bindir)
    if [ "${1:-}" = stop ]; then
        if [ -n "$bin" ] && [ -f "$dir/data/postmaster.pid" ]; then
            _perfmodel_pg_as "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
        fi
        rm -rf "$dir"
        return 0
    fi

    if [ -f "$dir/url" ] && [ -n "$bin" ] && [ -f "$dir/port" ] &&
        "$bin/pg_isready" -q -h 127.0.0.1 -p "$(cat "$dir/port")" -d perfmodel_test; then
        url=$(cat "$dir/url")
        _perfmodel_pg_log "reusing the server at $url"
    else
        if [ -z "$bin" ]; then
            [ "$(id -u)" = 0 ] || { _perfmodel_pg_log "no PostgreSQL server binaries and not root"; return 1; }
            _perfmodel_pg_log "installing postgresql with apt-get"
            { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
                apt-get install -y -qq --no-install-recommends postgresql; } >&2 ||
                { _perfmodel_pg_log "apt-get install postgresql failed"; return 1; }
            bin=$(_perfmodel_pg_bindir)
            [ -n "$bin" ] || { _perfmodel_pg_log "installed, but no pg_ctl found"; return 1; }
            # the package may have started its own cluster (it uses port 5432; ours does not)
        fi
        if [ -f "$dir/data/postmaster.pid" ]; then  # a stale server of ours: stop it
            _perfmodel_pg_as "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >&2 || true
        fi
        rm -rf "$dir" && mkdir -p "$dir" && chmod 700 "$dir" &&
            chown "$_PERFMODEL_PG_USER" "$dir" || { _perfmodel_pg_log "cannot prepare $dir"; return 1; }
        port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') ||
            { _perfmodel_pg_log "cannot find a free port"; return 1; }
        _perfmodel_pg_as "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 \
            --no-locale >"$dir/initdb.log" 2>&1 ||
            { cat "$dir/initdb.log" >&2; _perfmodel_pg_log "initdb failed"; return 1; }
        _perfmodel_pg_as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o \
            "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off" start >&2 ||
            { cat "$dir/server.log" >&2; _perfmodel_pg_log "the server did not start"; return 1; }
        _perfmodel_pg_as "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres perfmodel_test ||
            { _perfmodel_pg_log "createdb failed"; return 1; }
        url="postgresql+psycopg://postgres@127.0.0.1:$port/perfmodel_test"
        echo "$port" >"$dir/port" && echo "$url" >"$dir/url"
        _perfmodel_pg_log "started PostgreSQL ($bin) at $url, files in $dir"
    fi
    export PERFMODEL_TEST_POSTGRES_URL="$url"
    echo "export PERFMODEL_TEST_POSTGRES_URL=$url"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then  # executed: print the export line on stdout
    _perfmodel_pg_main "$@"
    exit $?
fi
_perfmodel_pg_main "$@" >/dev/null  # sourced: the variable is exported in the caller's shell
