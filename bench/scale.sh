#!/bin/sh
# bench/scale.sh — how `fheplan check` scales with values and requests (`make bench-scale`).
#
#   sh bench/scale.sh plan VALUES REQUESTS [POLICY]   writes a scale plan to standard output
#   sh bench/scale.sh run BUILD [REPEATS]             checks each scale plan REPEATS times
#                                                      (default 3) and prints the medians
#
# A scale plan declares VALUES values of 4 KiB at host and REQUESTS requests, each
# requiring one of them on cuda:0 under POLICY (tiered_lru or lookahead; default
# tiered_lru), in a stride that visits every value before it repeats; cuda:0 holds 256
# of them, so nearly every request evicts. REQUESTS 0 gives the bare array
# `value x[VALUES] = 8 B at host`. Each request is three instructions, so a plan stays
# inside rplan(5)'s limits up to 333,333 requests.
#
# `run` prints, per plan, the median wall time and the median peak resident memory of
# `fheplan check` (from /usr/bin/time when it is installed, else the time alone), and
# the machine's load average when it started: the figures are this machine's, not a
# bound (bench/README.md).
set -eu

plan() {
    values=$1 requests=$2 policy=${3:-tiered_lru}
    case $policy in tiered_lru|lookahead) ;; *) echo "scale.sh: unknown policy '$policy'" >&2; exit 2;; esac
    echo "rplan 1"
    if [ "$requests" -eq 0 ]; then
        echo "value x[$values] = 8 B at host"
        return
    fi
    # a stride coprime to VALUES visits every value once per VALUES requests
    stride=7919
    while [ $((values % stride)) -eq 0 ] && [ "$values" -gt 1 ]; do stride=$((stride + 2)); done
    cat <<EOF
budget cuda:0 1 MiB
value v[$values] = 4 KiB at host init zero
policy p = $policy(cuda:0 -> pinned -> host)
for i in 0..<$requests {
  request "r{i}" using p { require v[(i * $stride) % $values] @ cuda:0 }
}
EOF
}

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR ? a[int((NR + 1) / 2)] : "-") }'; }

run() {
    build=$1 repeats=${2:-3}
    fheplan=$build/fheplan
    [ -x "$fheplan" ] || { echo "scale.sh: $fheplan is not built" >&2; exit 2; }
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
    timer=""
    [ -x /usr/bin/time ] && timer=/usr/bin/time
    echo "fheplan check at scale: medians of $repeats runs; load average at start: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
    printf '%-44s %10s %12s\n' "plan" "seconds" "peak MiB"
    while read -r name values requests policy; do
        plan "$values" "$requests" "$policy" > "$dir/$name.rplan"
        : > "$dir/t" && : > "$dir/m"
        i=0
        while [ $i -lt "$repeats" ]; do
            if [ -n "$timer" ]; then
                $timer -f '%e %M' -o "$dir/tm" "$fheplan" check --quiet "$dir/$name.rplan" >/dev/null 2>&1 ||
                    { echo "scale.sh: check of $name failed" >&2; exit 1; }
                read -r s kb < "$dir/tm"
                echo "$s" >> "$dir/t"; echo "$((kb / 1024))" >> "$dir/m"
            else
                t0=$(date +%s.%N)
                "$fheplan" check --quiet "$dir/$name.rplan" >/dev/null 2>&1 ||
                    { echo "scale.sh: check of $name failed" >&2; exit 1; }
                t1=$(date +%s.%N)
                echo "$t1 $t0" | awk '{ printf "%.2f\n", $1 - $2 }' >> "$dir/t"; echo "-" >> "$dir/m"
            fi
            i=$((i + 1))
        done
        label="$values values, $requests requests"
        [ "$requests" -eq 0 ] && label="value x[$values] = 8 B at host"
        [ "$requests" -gt 0 ] && label="$label ($policy)"
        printf '%-44s %10s %12s\n' "$label" "$(median < "$dir/t")" "$(median < "$dir/m")"
    done <<EOF
array-1m        1000000 0      tiered_lru
v100k-r1k       100000  1000   tiered_lru
v1k-r100k-la    1000    100000 lookahead
v100k-r300k     100000  300000 tiered_lru
v100k-r300k-la  100000  300000 lookahead
EOF
}

case ${1:-} in
plan) shift; [ $# -ge 2 ] || { echo "usage: scale.sh plan VALUES REQUESTS [POLICY]" >&2; exit 2; }; plan "$@" ;;
run)  shift; [ $# -ge 1 ] || { echo "usage: scale.sh run BUILD [REPEATS]" >&2; exit 2; }; run "$@" ;;
*)    echo "usage: scale.sh plan VALUES REQUESTS [POLICY] | run BUILD [REPEATS]" >&2; exit 2 ;;
esac
