#!/usr/bin/env bash
# Sharded demo replicas (kcache-demo --shard) over one etcd, as separate processes.
#
#   scripts/shard.sh [scenario] [FLAGS]     3 replicas; kill -9 one, add a fourth, stop one
#                                           gracefully; every survivor must converge
#   scripts/shard.sh takeover [FLAGS]       --runs N times: 3 replicas, kill -9 one; prints the
#                                           time from the kill to the last of its keys
#                                           reconciled elsewhere, per run and the median
#   scripts/shard.sh s1 [FLAGS]             benchmark s1: I/O-bound reconciles (each waits
#                                           --delay-ms) on 1, 2 and 3 replicas; reconciles/s
#                                           while the user keeps every replica saturated
#
# Every replica writes a reconcile log (--reconcile-log); kcache-reconcile-check then checks that
# no two reconciles of one key by different replicas overlapped, and reports per-replica counts
# and how long the keys of the killed (and the stopped) replica waited for another replica. In
# the scenario and takeover modes, a killed replica's keys must have been reconciled by another
# replica within lease + retry period + one reconcile (the longest in the logs); the checker says
# whether they were, and fails past that plus --slack-ms (default 500: the handover's own etcd
# round trips, a write and a list to see the expiry and another pair to publish the new view,
# take tens of milliseconds each on a loaded machine).
#
# Flags: --etcd URL (default: start an etcd of our own on free ports, `etcd` or $KCACHE_ETCD_BIN),
# --bin DIR (where kcache-demo and kcache-reconcile-check are; default target/debug, built with
# `cargo build -p kcache-demo --features etcd` if missing), --lease-secs L (3), --sets N,
# --duration-secs D (scenario: 200 sets, 30 s; takeover: 60 sets, 8 s), --runs N (takeover: 10),
# --slack-ms MS, --delay-ms MS, --workers W (s1: 300 sets, user 15 s, 200 ms, 4 workers per replica; the rate
# is counted from 3 s after the user started to 1 s before it stopped), --keep (keep the
# logs; they are printed on failure either way).
#
# Exit status: 0 when every check passed, 1 otherwise, 2 for bad flags.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=scenario
case "${1:-}" in
    scenario|takeover|s1) mode=$1; shift ;;
esac
etcd_url="" dir=target/debug lease=3 sets="" duration="" runs=10 delay=200 workers=4 keep=0
slack=500
while [ $# -gt 0 ]; do
    case "$1" in
        --etcd) etcd_url=$2; shift 2 ;;
        --bin) dir=$2; shift 2 ;;
        --lease-secs) lease=$2; shift 2 ;;
        --sets) sets=$2; shift 2 ;;
        --duration-secs) duration=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --slack-ms) slack=$2; shift 2 ;;
        --delay-ms) delay=$2; shift 2 ;;
        --workers) workers=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
        *) echo "shard: unknown flag $1 (try --help)" >&2; exit 2 ;;
    esac
done
bin="$dir/kcache-demo" check="$dir/kcache-reconcile-check"
if [ ! -x "$bin" ] || [ ! -x "$check" ]; then
    [ "$dir" = target/debug ] || { echo "shard: no kcache-demo/kcache-reconcile-check in $dir" >&2; exit 2; }
    cargo build -p kcache-demo --features etcd
fi
# The demo's retry period is 2/15 of the lease (client-go's 2 s of 15 s).
bound_ms=$((lease * 1000 + lease * 2000 / 15))

out=$(mktemp -d "${TMPDIR:-/tmp}/kcache-shard.XXXXXX")
etcd_pid="" etcd_dir="" pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    if [ -n "$etcd_pid" ]; then kill "$etcd_pid" 2>/dev/null || true; wait "$etcd_pid" 2>/dev/null || true; fi
    if [ -n "$etcd_dir" ]; then rm -rf "$etcd_dir"; fi
    if [ "$keep" = 1 ]; then echo "shard: logs kept in $out"; else rm -rf "$out"; fi
}
trap cleanup EXIT

# free_port
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [ -z "$etcd_url" ]; then
    etcd_bin=${KCACHE_ETCD_BIN:-$(command -v etcd || true)}
    [ -n "$etcd_bin" ] || { echo "shard: needs --etcd URL or the etcd binary (Debian: etcd-server)" >&2; exit 2; }
    client=$(free_port)
    peer=$(free_port)
    while [ "$peer" = "$client" ]; do peer=$(free_port); done
    etcd_dir=$(mktemp -d "${TMPDIR:-/tmp}/kcache-shard-etcd.XXXXXX")
    "$etcd_bin" --name kcache-shard --data-dir "$etcd_dir" \
        --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
        --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        --initial-cluster "kcache-shard=http://127.0.0.1:$peer" >"$out/etcd.log" 2>&1 </dev/null &
    etcd_pid=$!
    tries=150
    until (exec 3<>"/dev/tcp/127.0.0.1/$client") 2>/dev/null; do
        tries=$((tries - 1))
        [ "$tries" -gt 0 ] || { echo "shard: etcd did not start:" >&2; tail -n 20 "$out/etcd.log" >&2; exit 1; }
        sleep 0.2
    done
    etcd_url="http://127.0.0.1:$client"
fi

# Waits (at most $3 s) for a line matching $2 in file $1.
wait_for_line() {
    local tries=$(($3 * 10))
    until grep -qE "$2" "$1"; do
        tries=$((tries - 1))
        [ "$tries" -gt 0 ] || { echo "shard: no line matching /$2/ in $1:" >&2; cat "$1" >&2; return 1; }
        sleep 0.1
    done
}

# start RUN NAME FLAGS...: starts replica NAME of run RUN (logs $out/RUN/NAME.{log,jsonl}); its pid
# goes to pid_NAME.
start() {
    local run=$1 name=$2
    shift 2
    mkdir -p "$out/$run"
    "$bin" --etcd "$etcd_url" --etcd-prefix "/kcache-shard-$$-$run/" --shard --quiet \
        --lease-secs "$lease" --identity "$name" --reconcile-log "$out/$run/$name.jsonl" "$@" \
        >"$out/$run/$name.log" 2>&1 </dev/null &
    pids+=($!)
    printf -v "pid_$name" '%s' "$!"
}

# finish RUN NAME: waits (at most 180 s) for replica NAME; fails unless it exited 0.
finish() {
    local run=$1 name=$2 pid rc=0
    pid=$(eval echo "\$pid_$name")
    timeout -k 5 180 tail --pid="$pid" -f /dev/null || kill -9 "$pid" 2>/dev/null || true
    wait "$pid" || rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "shard: replica $name of run $run exited $rc; its log:" >&2
        sed 's/^/      | /' "$out/$run/$name.log" >&2
        return 1
    fi
}

now_ns() { date +%s%N; }

# A run of 3 replicas (r1 runs the user once all three joined), r3 killed `after` s later.
# Prints the checker's report; sets `waited` to the kill -> last moved key reconciled time.
kill_run() {
    local run=$1 after=$2 killed
    shift 2
    start "$run" r1 --user --members 3 "$@"
    start "$run" r2 "$@"
    start "$run" r3 "$@"
    wait_for_line "$out/$run/r1.log" "r1\]: 3 members" 60
    sleep "$after"
    killed=$(now_ns)
    kill -9 "$pid_r3"
    wait "$pid_r3" 2>/dev/null || true
    finish "$run" r1
    finish "$run" r2
    "$check" --replicas r1,r2,r3 --killed "r3@$killed" --max-wait-ms "$bound_ms" --slack-ms "$slack" "$out/$run"/*.jsonl \
        | tee "$out/$run/check"
    waited=$(sed -n 's/.*waited until reconciled median [0-9.]* s, max \([0-9.]*\) s.*/\1/p' "$out/$run/check")
}

case "$mode" in
scenario)
    sets=${sets:-200} duration=${duration:-30}
    flags=(--sets "$sets" --duration-secs "$duration")
    echo "shard: scenario over $etcd_url: r1 (user), r2, r3; kill -9 r3, add r4, stop r2 (SIGTERM); lease ${lease}s, $sets sets, user ${duration}s"
    start s r1 --user --members 3 "${flags[@]}"
    start s r2 "${flags[@]}"
    start s r3 "${flags[@]}"
    wait_for_line "$out/s/r1.log" "r1\]: 3 members" 60
    sleep 5
    killed=$(now_ns)
    kill -9 "$pid_r3"
    wait "$pid_r3" 2>/dev/null || true
    echo "shard: r3 killed (SIGKILL)"
    sleep 5
    start s r4 "${flags[@]}"
    echo "shard: r4 started"
    sleep 5
    stopped=$(now_ns)
    kill -TERM "$pid_r2"
    echo "shard: r2 stopped (SIGTERM)"
    finish s r2
    finish s r1
    finish s r4
    for r in r1 r2 r4; do
        grep -E '^  (shard|converged) ' "$out/s/$r.log" | sed "s/^/  $r /"
    done
    "$check" --replicas r1,r2,r3,r4 --killed "r3@$killed" --stopped "r2@$stopped" \
        --max-wait-ms "$bound_ms" --slack-ms "$slack" "$out/s"/*.jsonl
    echo "shard: scenario OK"
    ;;
takeover)
    sets=${sets:-60} duration=${duration:-8}
    echo "shard: takeover over $etcd_url, $runs runs: 3 replicas, r3 killed 3 s after all joined; lease ${lease}s, $sets sets, user ${duration}s"
    all=()
    for i in $(seq 1 "$runs"); do
        kill_run "t$i" 3 --sets "$sets" --duration-secs "$duration" >"$out/t$i.out"
        grep -E 'killed r3|overlaps|bound for' "$out/t$i.out" | sed "s/^/  run $i /"
        all+=("$waited")
    done
    median=$(printf '%s\n' "${all[@]}" | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
    echo "shard: kill -9 -> last moved key reconciled, $runs runs: $(printf '%s ' "${all[@]}")s; median ${median} s (lease ${lease} s + retry $((lease * 2000 / 15)) ms; load $(cut -d' ' -f1-3 /proc/loadavg))"
    ;;
s1)
    sets=${sets:-300} duration=${duration:-15}
    flags=(--sets "$sets" --duration-secs "$duration" --max-replicas 2 --workers "$workers" --reconcile-delay-ms "$delay")
    echo "shard: s1 over $etcd_url: $sets sets (0..=2 pods each), the user changing them for ${duration} s once all replicas joined; each reconcile waits ${delay} ms, $workers workers per replica (at most $((workers * 1000 / delay)) reconciles/s each)"
    declare -A rate
    for n in 1 2 3; do
        run="s1-$n"
        start "$run" r1 --user --members "$n" "${flags[@]}"
        for i in $(seq 2 "$n"); do start "$run" "r$i" "${flags[@]}"; done
        wait_for_line "$out/$run/r1.log" "r1\]: $n members" 60
        began=$(now_ns)
        for i in $(seq 1 "$n"); do finish "$run" "r$i"; done
        from=$((began + 3000000000)) to=$((began + (duration - 1) * 1000000000))
        "$check" --window "$from:$to" "$out/$run"/*.jsonl >"$out/$run.check"
        rate[$n]=$(sed -n 's/.*window of [0-9.]* s: \([0-9.]*\) reconciles\/s.*/\1/p' "$out/$run.check")
        sed "s/^/  $n replica(s): /" "$out/$run.check"
    done
    ratio=$(awk -v a="${rate[3]}" -v b="${rate[1]}" 'BEGIN {printf "%.2f", a / b}')
    echo "shard: s1 reconciles/s: 1 replica ${rate[1]}, 2 replicas ${rate[2]}, 3 replicas ${rate[3]}; 3 vs 1: ${ratio}x (load $(cut -d' ' -f1-3 /proc/loadavg))"
    awk -v r="$ratio" 'BEGIN {exit !(r >= 2.5)}' || { echo "shard: s1 FAILED: 3 replicas are below 2.5x one replica" >&2; exit 1; }
    ;;
esac
