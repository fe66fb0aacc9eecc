#!/usr/bin/env bash
# The demo under --chaos for many seeds, each required to converge.
#
#   scripts/soak.sh [--seeds N] [--first S] [--jobs J] [--duration-secs D] [--bin PATH]
#                   [--etcd] [-- DEMO FLAGS...]
#
# Runs kcache-demo --chaos --quiet --seed S --duration-secs D for N seeds (S, S+1, ...), J at a
# time, and prints one line per seed (converged or not, settle time, reconciles, requeues, the
# faults injected, peak RSS). A seed that fails gets its full report printed. Exit status: 0 when
# every seed converged, 1 otherwise.
#
# --etcd: the same over etcd. The script starts its own etcd (the `etcd` binary, or
# $KCACHE_ETCD_BIN) on free 127.0.0.1 ports with a temporary data dir, runs the seeds one after
# another (each under its own key prefix), and during the first seed kills etcd with SIGKILL
# and restarts it on the same data dir: the demo must ride out the outage and still converge.
# Needs a demo built with `--features etcd` (--bin; default target/debug/kcache-demo).
#
# Defaults: 50 seeds from 1, 2 jobs, 5 s each, --sets 30 --max-replicas 5, the release binary
# (built first if missing: cargo build --release -p kcache-demo).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seeds=50 first=1 jobs=2 duration=5 bin="" etcd=0
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seeds) seeds=$2; shift 2 ;;
        --first) first=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --duration-secs) duration=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        --etcd) etcd=1; shift ;;
        --) shift; extra=("$@"); break ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) echo "soak: unknown flag $1 (try --help)" >&2; exit 2 ;;
    esac
done
[ "${#extra[@]}" -gt 0 ] || extra=(--sets 30 --max-replicas 5)

if [ -z "$bin" ]; then
    if [ "$etcd" = 1 ]; then
        bin=target/debug/kcache-demo
        [ -x "$bin" ] || cargo build -p kcache-demo --features etcd
    else
        bin=target/release/kcache-demo
        [ -x "$bin" ] || cargo build --release -p kcache-demo
    fi
fi
[ -x "$bin" ] || { echo "soak: no demo binary at $bin" >&2; exit 2; }

out=$(mktemp -d "${TMPDIR:-/tmp}/kcache-soak.XXXXXX")
etcd_pid="" etcd_dir="" etcd_args=()
cleanup() {
    if [ -n "$etcd_pid" ]; then kill "$etcd_pid" 2>/dev/null || true; wait "$etcd_pid" 2>/dev/null || true; fi
    if [ -n "$etcd_dir" ]; then rm -rf "$etcd_dir"; fi
    rm -rf "$out"
}
trap cleanup EXIT

# free_port
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

start_etcd() {
    "${etcd_args[@]}" >"$out/etcd.log" 2>&1 </dev/null &
    etcd_pid=$!
    local tries=150
    until (exec 3<>"/dev/tcp/127.0.0.1/$client") 2>/dev/null; do
        tries=$((tries - 1))
        [ "$tries" -gt 0 ] || { echo "soak: etcd did not start:" >&2; tail -n 20 "$out/etcd.log" >&2; return 1; }
        sleep 0.2
    done
}

if [ "$etcd" = 1 ]; then
    etcd_bin=${KCACHE_ETCD_BIN:-$(command -v etcd || true)}
    [ -n "$etcd_bin" ] || { echo "soak: --etcd needs the etcd binary (Debian: etcd-server)" >&2; exit 2; }
    client=$(free_port)
    peer=$(free_port)
    while [ "$peer" = "$client" ]; do peer=$(free_port); done
    etcd_dir=$(mktemp -d "${TMPDIR:-/tmp}/kcache-soak-etcd.XXXXXX")
    etcd_args=("$etcd_bin" --name kcache-soak --data-dir "$etcd_dir"
        --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client"
        --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer"
        --initial-cluster "kcache-soak=http://127.0.0.1:$peer")
    start_etcd
    jobs=1
fi

# One seed: its report goes to $out/S.log, its exit status to $out/S.rc.
run_seed() {
    local s=$1 flags=(--chaos --quiet --seed "$1" --duration-secs "$duration")
    if [ "$etcd" = 1 ]; then
        flags+=(--etcd "http://127.0.0.1:$client" --etcd-prefix "/kcache-soak-$$-$s/")
    fi
    local rc=0
    timeout -k 5 300 "$bin" "${flags[@]}" "${extra[@]}" >"$out/$s.log" 2>&1 || rc=$?
    echo "$rc" >"$out/$s.rc"
}

# Under --etcd, the first seed's run sees etcd killed (SIGKILL) 2 s in and restarted 1 s later.
outage() {
    sleep 2
    kill -9 "$etcd_pid" 2>/dev/null || true
    wait "$etcd_pid" 2>/dev/null || true
    echo "    etcd killed (SIGKILL) during seed $first; restarting it in 1 s"
    sleep 1
    start_etcd
    echo "    etcd restarted on the same data dir"
}

field() { sed -n "s/^  $2 *//p" "$1" | head -n 1; }

report_seed() {
    local s=$1 log="$out/$1.log" rc
    rc=$(cat "$out/$1.rc")
    local converged rss reconciles
    converged=$(field "$log" converged)
    rss=$(sed -n 's/^  memory *peak RSS \([0-9.]*\) MiB.*/\1/p' "$log" | head -n 1)
    reconciles=$(sed -n 's/^  controller *\([0-9]*\) reconciles.*/\1/p' "$log" | head -n 1)
    local injected
    injected=$(grep '^  faults' "$log" | grep -o '[a-z_]*: [1-9][0-9]*' | awk -F': ' '{n[$1] += $2} END {for (k in n) printf "%s=%d ", k, n[k]}')
    local user_failed
    user_failed=$(sed -n 's/^  user .* \([0-9]*\) failed$/\1/p' "$log" | head -n 1)
    if [ "$rc" = 0 ]; then
        printf 'seed %-6s ok     %-26s reconciles %-6s user failures %-4s rss %6s MiB  faults %s\n' "$s" "$converged" "${reconciles:-?}" "${user_failed:-?}" "${rss:-?}" "${injected:-none}"
    else
        printf 'seed %-6s FAILED (exit %s) %s\n' "$s" "$rc" "$converged"
        sed 's/^/      | /' "$log"
    fi
    if [ -n "$rss" ]; then echo "$rss" >>"$out/rss"; fi
}

echo "soak: $seeds seeds from $first, $jobs at a time, ${duration}s each, $bin ${extra[*]}$([ "$etcd" = 1 ] && echo " over etcd 127.0.0.1:$client")"
started=$(date +%s)
last=$((first + seeds - 1))
s=$first
running=()
while [ "$s" -le "$last" ] || [ "${#running[@]}" -gt 0 ]; do
    while [ "$s" -le "$last" ] && [ "${#running[@]}" -lt "$jobs" ]; do
        if [ "$etcd" = 1 ] && [ "$s" = "$first" ]; then
            run_seed "$s" &
            seed_pid=$!
            outage
            wait "$seed_pid"
            report_seed "$s"
        else
            run_seed "$s" &
            running+=("$!:$s")
        fi
        s=$((s + 1))
    done
    if [ "${#running[@]}" -gt 0 ]; then
        wait -n || true
        still=()
        for entry in "${running[@]}"; do
            pid=${entry%%:*} seed=${entry##*:}
            if [ -f "$out/$seed.rc" ]; then
                wait "$pid" 2>/dev/null || true
                report_seed "$seed"
            else
                still+=("$entry")
            fi
        done
        running=("${still[@]+"${still[@]}"}")
    fi
done

failed=0
for ((s = first; s <= last; s++)); do
    [ "$(cat "$out/$s.rc")" = 0 ] || failed=$((failed + 1))
done
peak=$(sort -n "$out/rss" 2>/dev/null | tail -n 1)
echo "soak: $seeds seeds run, $failed did not converge, largest peak RSS ${peak:-?} MiB, $(($(date +%s) - started)) s"
[ "$failed" -eq 0 ]
