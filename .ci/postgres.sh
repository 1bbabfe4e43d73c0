#!/usr/bin/env bash
# Make sure PostgreSQL server binaries (initdb, pg_ctl, postgres) are on this machine,
# so the PostgreSQL tests run instead of failing. Installs Debian's postgresql package
# with apt-get when none are found. Prints the bin directory it found.
set -euo pipefail

find_bindir() {
    local dir
    if [ -n "${CONTEXT_GUARD_PG_BIN:-}" ] && [ -x "${CONTEXT_GUARD_PG_BIN}/initdb" ]; then
        echo "${CONTEXT_GUARD_PG_BIN}"
        return 0
    fi
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
            echo "$dir"
            return 0
        fi
    done
    if command -v pg_config >/dev/null 2>&1; then
        dir="$(pg_config --bindir)"
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
            echo "$dir"
            return 0
        fi
    fi
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(command -v initdb)"
        return 0
    fi
    return 1
}

if bindir="$(find_bindir)"; then
    echo "PostgreSQL binaries: $bindir"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "No PostgreSQL server binaries and no apt-get: install PostgreSQL (initdb, pg_ctl)" \
         "or set CONTEXT_GUARD_PG_BIN to their directory." >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends postgresql
# Debian's package starts a cluster of its own; the tests start theirs, so stop it.
if command -v pg_ctlcluster >/dev/null 2>&1; then
    $SUDO service postgresql stop >/dev/null 2>&1 || true
fi
bindir="$(find_bindir)" || {
    echo "apt-get installed postgresql but no initdb/pg_ctl was found." >&2
    exit 1
}
echo "PostgreSQL binaries: $bindir"
