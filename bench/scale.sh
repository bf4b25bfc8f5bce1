#!/bin/sh
# bench/scale.sh — how `fheplan check` scales with values, requests, declarations, fields
# and profiles (`make bench-scale`).
#
#   sh bench/scale.sh plan VALUES REQUESTS [POLICY]   writes a scale plan to standard output
#   sh bench/scale.sh kernels N                        a plan declaring N kernel costs
#   sh bench/scale.sh fields N                         a plan with one value of N fields
#   sh bench/scale.sh profile N                        a --profile document of N kernels
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
# The other rows: 100,000 `kernel` declarations (their names hashed, each looked up once);
# a value at the field limit (16 fields) and one of 100,000 fields, refused at its 17th;
# a plan checked with a --profile of 200,000 kernels (strict JSON, names hashed).
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

kernels() {
    echo "rplan 1"
    echo "value x = 4 KiB at host"
    awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) printf "kernel k%d cost %d us\n", i, 1 + i % 7 }'
    echo 'plan "p" { body { run k0(x) } }'
}

fields() {
    awk -v n="$1" 'BEGIN {
        printf "rplan 1\nvalue x = %d KiB at host fields(", n
        for (i = 0; i < n; i++) printf "%sf%d", i ? ", " : "", i
        printf ")\n"
    }'
}

profile() {
    awk -v n="$1" 'BEGIN {
        printf "{\"fheplan_profile\": 1, \"kernels\": ["
        for (i = 0; i < n; i++)
            printf "%s{\"name\": \"k%d\", \"calls\": 1, \"mean_s\": 1e-6}", i ? ", " : "", i
        printf "]}\n"
    }'
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
    while read -r name kind values requests policy; do
        want=0 args="" label=""
        case $kind in
        req)
            plan "$values" "$requests" "$policy" > "$dir/$name.rplan"
            label="$values values, $requests requests ($policy)"
            [ "$requests" -eq 0 ] && label="value x[$values] = 8 B at host" ;;
        kernels)
            kernels "$values" > "$dir/$name.rplan"
            label="$values kernel declarations" ;;
        fields)
            fields "$values" > "$dir/$name.rplan"
            label="a value of $values fields"
            [ "$values" -gt 16 ] && { want=1; label="$label (refused)"; } ;;
        profile)
            profile "$values" > "$dir/$name.json"
            kernels 1 > "$dir/$name.rplan"
            args="--profile $dir/$name.json"
            label="--profile of $values kernels" ;;
        esac
        : > "$dir/t" && : > "$dir/m"
        i=0
        while [ $i -lt "$repeats" ]; do
            rc=0
            if [ -n "$timer" ]; then
                # shellcheck disable=SC2086
                $timer -f '%e %M' -o "$dir/tm" "$fheplan" check --quiet $args "$dir/$name.rplan" \
                    >/dev/null 2>&1 || rc=$?
                read -r s kb <<TM
$(tail -n 1 "$dir/tm")
TM
                echo "$s" >> "$dir/t"; echo "$((kb / 1024))" >> "$dir/m"
            else
                t0=$(date +%s.%N)
                # shellcheck disable=SC2086
                "$fheplan" check --quiet $args "$dir/$name.rplan" >/dev/null 2>&1 || rc=$?
                t1=$(date +%s.%N)
                echo "$t1 $t0" | awk '{ printf "%.2f\n", $1 - $2 }' >> "$dir/t"; echo "-" >> "$dir/m"
            fi
            [ "$rc" -eq "$want" ] || { echo "scale.sh: check of $name exited $rc, not $want" >&2; exit 1; }
            i=$((i + 1))
        done
        printf '%-44s %10s %12s\n' "$label" "$(median < "$dir/t")" "$(median < "$dir/m")"
    done <<EOF
array-1m        req     1000000 0      tiered_lru
v100k-r1k       req     100000  1000   tiered_lru
v1k-r100k-la    req     1000    100000 lookahead
v100k-r300k     req     100000  300000 tiered_lru
v100k-r300k-la  req     100000  300000 lookahead
kernels-100k    kernels 100000  0      -
fields-16       fields  16      0      -
fields-100k     fields  100000  0      -
profile-200k    profile 200000  0      -
EOF
}

case ${1:-} in
plan) shift; [ $# -ge 2 ] || { echo "usage: scale.sh plan VALUES REQUESTS [POLICY]" >&2; exit 2; }; plan "$@" ;;
kernels|fields|profile) k=$1; shift; [ $# -eq 1 ] || { echo "usage: scale.sh $k N" >&2; exit 2; }; $k "$1" ;;
run)  shift; [ $# -ge 1 ] || { echo "usage: scale.sh run BUILD [REPEATS]" >&2; exit 2; }; run "$@" ;;
*)    echo "usage: scale.sh plan VALUES REQUESTS [POLICY] | kernels N | fields N | profile N | run BUILD [REPEATS]" >&2; exit 2 ;;
esac
