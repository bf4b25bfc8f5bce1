#!/bin/sh
# tests/tools/timeline.sh — `make test-timeline`: `fheplan run --timeline` on the emulated
# device writes one self-contained HTML page (its only script inline, nothing loaded from
# elsewhere) for the bootstrap plan on one device and the two-device plan on two; headless
# Chromium runs the page's script and its DOM must have: an SVG that scales (a viewBox, no
# fixed width), every lane named, the legend's entries (host waits, peer copies, idle with
# room among them), a residency series with points for every location used, peer copies
# drawn in their own colour, and after a zoom (#t=A,B) time ticks only inside [A, B], in
# ms. A screenshot at a 1280 px window must not be blank (tests/tools/pngstat.c).
# Without Chromium the rendering is skipped, saying so (make deps CHROMIUM=1 installs it).
set -u
BUILD=${BUILD:-build}
out=$BUILD/timeline-test
rm -rf "$out" && mkdir -p "$out"
fail() { echo "test-timeline: FAIL: $*"; exit 1; }

FHEPLAN_DEVICE=emu:1 "$BUILD/fheplan" run --quiet --timeline "$out/boot.html" \
    plans/ckks-bootstrap.rplan >"$out/run.txt" 2>&1 || fail "fheplan run (see $out/run.txt)"
FHEPLAN_DEVICE=emu:2 "$BUILD/fheplan" run --quiet --scale 512 --timeline "$out/two.html" \
    plans/ckks-bootstrap-2gpu.rplan >"$out/run2.txt" 2>&1 || fail "fheplan run, two devices (see $out/run2.txt)"
for page in "$out/boot.html" "$out/two.html"; do
    [ -s "$page" ] || fail "no timeline written: $page"
    # self-contained: no script, style, image or font from anywhere else
    if grep -Eiq '(src|href)=|@import|url\([^#]|<link|<iframe|<img|<script[^>]' "$page"; then
        fail "$page loads something: $(grep -Eio '(src|href)=[^ >]*|@import|url\([^#]|<link|<iframe|<img|<script[^>]*' "$page" | head -3)"
    fi
    [ "$(grep -c '<script>' "$page")" -eq 1 ] || fail "$page: want one inline script"
    # the picture scales: a viewBox, no width in pixels on the SVG
    grep -q '<svg id="tl"[^>]* viewBox="0 0 [0-9]* [0-9]*"' "$page" || fail "$page: no viewBox"
    if grep -Eq '<svg[^>]* width="[0-9]+"' "$page"; then fail "$page: the SVG has a fixed width"; fi
    # the page is well-formed XML from <svg to </svg> (xmllint, when present)
    if command -v xmllint >/dev/null 2>&1; then
        sed -n '/<svg/,/<\/svg>/p' "$page" | xmllint --noout - || fail "$page: the SVG is not well-formed"
    fi
done
for want in 'CoeffToSlot' 'EvalMod' 'SlotToCoeff' 'data-lane="cuda:0 transfer stream' \
    'data-lane="cuda:0 compute stream' 'data-lane="host: plans, requests, host waits"' \
    'data-lane="stages"' 'evictions (' 'bytes at cuda:0' 'budget ' '<title>evict rot\[' \
    'data-series="resident cuda:0"' 'data-series="charged cuda:0"' 'GB/s' 'values: rot'; do
    grep -q "$want" "$out/boot.html" || fail "the page lacks \"$want\""
done
grep -q 'data-lane="cuda:1 transfer stream' "$out/two.html" || fail "two devices: no cuda:1 lane"
grep -q 'fill="#8e44ad"' "$out/two.html" || fail "two devices: no peer copy in the peer colour"

chrome=""
for c in chromium chromium-browser google-chrome; do
    command -v "$c" >/dev/null 2>&1 && { chrome=$c; break; }
done
if [ -z "$chrome" ]; then
    echo "test-timeline: SKIP rendering: Chromium is not installed (make deps CHROMIUM=1 installs Debian's chromium)"
    exit 0
fi
# a profile of its own, so that runs never share state
render() { # render URL OUT [extra flags]: the DOM after the page's script ran
    url=$1 dom=$2
    shift 2
    "$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
        --user-data-dir="$out/profile" --window-size=1280,900 "$@" "$url" \
        >"$dom" 2>"$out/chromium.log" || fail "$chrome failed (see $out/chromium.log)"
}
for name in boot two; do
    dom=$out/$name.dom
    render "file://$(pwd)/$out/$name.html" "$dom" --dump-dom
    # every lane has a name, none a placeholder
    lanes=$(grep -o '<g class="lane" data-lane="[^"]*"' "$dom" | wc -l)
    [ "$lanes" -ge 5 ] || fail "$name: $lanes lanes"
    if grep -Eq 'data-lane=""|data-lane="track [0-9]|other stream' "$dom"; then
        fail "$name: an unnamed lane: $(grep -Eo 'data-lane="(track [0-9]*|)"|other stream[^<]*' "$dom" | head -2)"
    fi
    for key in pcie peer back body request plan wait idle eviction resident charged budget; do
        grep -q "data-key=\"$key\"" "$dom" || fail "$name: the legend lacks $key"
    done
    # the script drew the axis: ticks in ms
    grep -q 'class="tick">[0-9.]* ms<' "$dom" || fail "$name: no time ticks in ms"
    if grep -Eq 'class="tick">[^<]*( us| s)<' "$dom"; then fail "$name: a tick in another unit"; fi
done
# a residency series with points (some above zero) for every location the run used
for loc in cuda:0 pinned; do
    pts=$(grep -o "data-series=\"resident $loc\"[^>]*data-pts=\"[^\"]*\"" "$out/boot.dom" | sed 's/.*data-pts="//; s/"$//')
    base=$(grep -o "data-series=\"resident $loc\" data-base=\"[0-9.]*\"" "$out/boot.dom" | sed 's/.*data-base="//; s/"$//')
    [ -n "$pts" ] && [ -n "$base" ] || fail "no residency series for $loc"
    n=$(echo "$pts" | tr ' ' '\n' | grep -c :)
    above=$(echo "$pts" | tr ' ' '\n' | awk -F: -v b="$base" '$2 != "" && $2 + 0 < b - 0.5 { n++ } END { print n + 0 }')
    [ "$n" -ge 2 ] && [ "$above" -ge 1 ] || fail "resident $loc: $n points, $above above zero"
done
for loc in cuda:0 cuda:1; do
    grep -q "data-series=\"resident $loc\"" "$out/two.dom" || fail "two devices: no residency series for $loc"
done
# zoom: the window from #t=A,B (ms) has its ticks inside it
span=$(sed -n 's/.*<svg id="tl"[^>]* data-t1="\([0-9.]*\)".*/\1/p' "$out/boot.html" | head -1)
a=$(awk -v s="$span" 'BEGIN { printf "%.3f", s * 0.4 }')
b=$(awk -v s="$span" 'BEGIN { printf "%.3f", s * 0.45 }')
render "file://$(pwd)/$out/boot.html#t=$a,$b" "$out/zoom.dom" --dump-dom
ticks=$(grep -o 'class="tick">[0-9.]* ms<' "$out/zoom.dom" | sed 's/.*>\([0-9.]*\) ms</\1/')
[ -n "$ticks" ] || fail "zoomed: no ticks"
echo "$ticks" | awk -v a="$a" -v b="$b" '$1 < a - 1e-6 || $1 > b + 1e-6 { bad = $1 } END { exit bad != "" }' ||
    fail "zoomed to $a..$b ms: ticks outside: $(echo $ticks)"
${CC:-cc} -O1 -o "$out/pngstat" tests/tools/pngstat.c -lz || fail "cannot build pngstat"
render "file://$(pwd)/$out/boot.html" "$out/shot.log" --screenshot="$(pwd)/$out/boot.png"
stat=$("$out/pngstat" "$out/boot.png") || fail "blank screenshot: $stat"
echo "test-timeline: ok: $out/boot.html and $out/two.html rendered by $chrome: $stat"
