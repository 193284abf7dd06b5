#!/usr/bin/env bash
# The sans-IO crates built for wasm32-unknown-unknown, then the dots game run inside the
# resulting module under node (tools/wasm-smoke): issue 51's first step toward a browser
# client. The rustup toolchains here have no wasm32 standard library, so this uses Debian's
# browser-build Rust (rustc-web, cargo-web, rust-web-src, rust-web-llvm, lld-22 for
# rust-lld), installed when missing, and builds std from its source (-Zbuild-std).
#
#   tools/wasm-check.sh            # WASM_SCENES=1 tools/wasm-check.sh: the scenes too
#
# CARGO_TARGET_DIR defaults to target/wasm (its own: the web rustc is 1.96, not the
# workspace's 1.95, and shares no artifacts with it); WASM_JOBS sets cargo's -j.
# Exits non-zero, with a line saying which step failed, on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
  echo "wasm-check: FAILED: $*" >&2
  exit 1
}

# /usr/bin/cargo by path: the rustup proxies come first on PATH.
CARGO=/usr/bin/cargo
RUSTC_WEB=/usr/bin/rustc
PACKAGES="rustc-web cargo-web rust-web-src rust-web-llvm lld-22"
missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "wasm-check: installing$missing"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq || fail "apt-get update"
  # shellcheck disable=SC2086 # one word per package
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null ||
    fail "apt-get install$missing"
fi
[ -x "$CARGO" ] && [ -x "$RUSTC_WEB" ] || fail "$CARGO or $RUSTC_WEB missing after the install"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target/wasm}"
# The sans-IO crates (ARCHITECTURE.md) and the smoke module, in one cargo run so std is
# built once. Not the transport (sockets, threads, a clock), the lab or the Bevy adapter.
# WASM_SCENES=1 adds lagless-scenes: it builds unchanged, but Rapier 2D and 3D make the cold
# build 6 to 7 minutes longer on a 2-core machine, too much for every CI run until the
# browser page needs them (docs/web.md).
CRATES="lagless-wire lagless-core lagless-replication lagless-netem lagless-netcode lagless-wasm-smoke"
if [ "${WASM_SCENES:-0}" = 1 ]; then CRATES="$CRATES lagless-scenes"; fi
args=()
for c in $CRATES; do args+=(-p "$c"); done
if [ -n "${WASM_JOBS:-}" ]; then args+=(-j "$WASM_JOBS"); fi
echo "wasm-check: building for wasm32-unknown-unknown with $($CARGO --version):$(printf ' %s' $CRATES)"
# RUSTC_BOOTSTRAP: -Zbuild-std is unstable, and this is a stable rustc with its source.
RUSTC="$RUSTC_WEB" RUSTC_BOOTSTRAP=1 "$CARGO" build --release --locked \
  --target wasm32-unknown-unknown -Zbuild-std=std,panic_abort "${args[@]}" ||
  fail "the wasm32 build (see cargo's errors above)"

module="$CARGO_TARGET_DIR/wasm32-unknown-unknown/release/lagless_wasm_smoke.wasm"
[ -f "$module" ] || fail "no $module after the build"
command -v node >/dev/null || fail "node is needed to run the smoke module"
node tools/wasm-smoke/run.mjs "$module" 20 || fail "the dots game inside the wasm module (tools/wasm-smoke)"
echo "wasm-check: ok"
