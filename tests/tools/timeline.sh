#!/bin/sh
# tests/tools/timeline.sh — `make test-timeline`: `fheplan run --timeline` on the emulated
# device writes one self-contained HTML page (nothing loaded from elsewhere) for the
# bootstrap plan, with its stage names, streams, evictions and charged bytes; headless
# Chromium renders it and the screenshot must not be blank (tests/tools/pngstat.c).
# Without Chromium the rendering is skipped, saying so (make deps CHROMIUM=1 installs it).
set -u
BUILD=${BUILD:-build}
out=$BUILD/timeline-test
rm -rf "$out" && mkdir -p "$out"
fail() { echo "test-timeline: FAIL: $*"; exit 1; }

FHEPLAN_DEVICE=emu:1 "$BUILD/fheplan" run --quiet --timeline "$out/boot.html" \
    plans/ckks-bootstrap.rplan >"$out/run.txt" 2>&1 || fail "fheplan run (see $out/run.txt)"
page=$out/boot.html
[ -s "$page" ] || fail "no timeline written"
# self-contained: no scripts, styles, images or fonts from anywhere else
if grep -Eiq '(src|href)=|@import|url\(|<script|<link|<iframe|<img' "$page"; then
    fail "the page loads something: $(grep -Eio '(src|href)=[^ >]*|@import|url\(|<script|<link|<iframe|<img' "$page" | head -3)"
fi
for want in '<svg' 'CoeffToSlot' 'EvalMod' 'SlotToCoeff' 'transfer stream cuda:0' \
    'compute stream cuda:0' 'evictions (' 'charged cuda:0' 'budget ' 'evict #'; do
    grep -q "$want" "$page" || fail "the page lacks \"$want\""
done
# the page is well-formed XML from <svg to </svg> (xmllint, when present)
if command -v xmllint >/dev/null 2>&1; then
    sed -n '/<svg/,/<\/svg>/p' "$page" | xmllint --noout - || fail "the SVG is not well-formed"
fi

chrome=""
for c in chromium chromium-browser google-chrome; do
    command -v "$c" >/dev/null 2>&1 && { chrome=$c; break; }
done
if [ -z "$chrome" ]; then
    echo "test-timeline: SKIP rendering: Chromium is not installed (make deps CHROMIUM=1 installs Debian's chromium)"
    exit 0
fi
${CC:-cc} -O1 -o "$out/pngstat" tests/tools/pngstat.c -lz || fail "cannot build pngstat"
# a profile of its own, so that runs never share state
"$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$out/profile" --window-size=1540,640 \
    --screenshot="$out/boot.png" "file://$(pwd)/$page" >"$out/chromium.log" 2>&1 ||
    fail "$chrome failed (see $out/chromium.log)"
stat=$("$out/pngstat" "$out/boot.png") || fail "blank screenshot: $stat"
echo "test-timeline: ok: $page rendered by $chrome: $stat"
