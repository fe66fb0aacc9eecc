#!/usr/bin/env bash
# The demo restarted warm over etcd: a restart within etcd's history resumes without listing.
#
#   scripts/warm_restart.sh [--bin PATH] [--sets N] [--duration-secs D]
#
# Starts its own etcd (the `etcd` binary, or $KCACHE_ETCD_BIN) on free 127.0.0.1 ports with a
# temporary data dir and watch progress notifications every 500 ms (etcd's default is 10 minutes:
# a restored informer whose prefix stays quiet learns from them that it caught up). Then runs the
# demo twice with the same --etcd-prefix and --snapshot-dir: the first run starts cold and
# leaves snapshots; the second must converge too, and report both informers restored from their
# snapshots with 0 list calls. Exit status 0 when it does, 1 otherwise.
# Needs a demo built with `--features etcd` (default target/debug/kcache-demo, built if missing).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bin="" sets=20 duration=2
while [ $# -gt 0 ]; do
    case "$1" in
        --bin) bin=$2; shift 2 ;;
        --sets) sets=$2; shift 2 ;;
        --duration-secs) duration=$2; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "warm_restart: unknown flag $1 (try --help)" >&2; exit 2 ;;
    esac
done
if [ -z "$bin" ]; then
    bin=target/debug/kcache-demo
    [ -x "$bin" ] || cargo build -p kcache-demo --features etcd
fi
[ -x "$bin" ] || { echo "warm_restart: no demo binary at $bin" >&2; exit 2; }
etcd_bin=${KCACHE_ETCD_BIN:-$(command -v etcd || true)}
[ -n "$etcd_bin" ] || { echo "warm_restart: needs the etcd binary (Debian: etcd-server)" >&2; exit 2; }

out=$(mktemp -d "${TMPDIR:-/tmp}/kcache-warm-restart.XXXXXX")
etcd_pid=""
cleanup() {
    if [ -n "$etcd_pid" ]; then kill "$etcd_pid" 2>/dev/null || true; wait "$etcd_pid" 2>/dev/null || true; fi
    rm -rf "$out"
}
trap cleanup EXIT

# free_port
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
client=$(free_port)
peer=$(free_port)
while [ "$peer" = "$client" ]; do peer=$(free_port); done
"$etcd_bin" --name kcache-warm --data-dir "$out/etcd" \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "kcache-warm=http://127.0.0.1:$peer" \
    --experimental-watch-progress-notify-interval 500ms >"$out/etcd.log" 2>&1 </dev/null &
etcd_pid=$!
tries=150
until (exec 3<>"/dev/tcp/127.0.0.1/$client") 2>/dev/null; do
    tries=$((tries - 1))
    [ "$tries" -gt 0 ] || { echo "warm_restart: etcd did not start:" >&2; tail -n 20 "$out/etcd.log" >&2; exit 1; }
    sleep 0.2
done

flags=(--etcd "http://127.0.0.1:$client" --etcd-prefix /kcache-warm/ --snapshot-dir "$out/snapshots"
    --sets "$sets" --duration-secs "$duration" --quiet)
for run in cold warm; do
    if ! timeout -k 5 120 "$bin" "${flags[@]}" --seed "$([ "$run" = cold ] && echo 1 || echo 2)" >"$out/$run.log" 2>&1; then
        echo "warm_restart: the $run run did not converge:" >&2
        cat "$out/$run.log" >&2
        exit 1
    fi
    grep -E '^  (start|informers) ' "$out/$run.log" | sed "s/^/    $run: /"
done
for informer in replicasets pods; do
    if ! grep -qE "^  start       $informer: restored [0-9]+ objects .*; 0 list call\(s\)$" "$out/warm.log"; then
        echo "warm_restart: the restarted demo's $informer informer did not resume without a list:" >&2
        cat "$out/warm.log" >&2
        exit 1
    fi
done
echo "warm_restart: the restarted demo resumed both informers from their snapshots without a list"
