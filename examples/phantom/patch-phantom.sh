#!/bin/sh
# examples/phantom/patch-phantom.sh DIR — the one edit the example makes to the user's own
# Phantom tree, at build time: three inline accessors in include/secretkey.h. A Galois key's
# relinearization keys become reachable for writing (PhantomGaloisKey::relin_key_mut); a
# relinearization key can free its own parts while keeping the device pointer table that
# key switching reads (PhantomRelinKey::release_parts), so that an outside owner (fheplan)
# can hold the key bytes and bind their pointers; and it tells the device address of the
# 64-byte seed from which key generation sampled a part's "a" half
# (PhantomRelinKey::part_seed_a), so that the seed can be exported with the "b" half.
# Header-only: the built libPhantom.so is the same with or without it. Idempotent: each
# accessor is added once; a patched tree is left as it is.
set -eu
dir=${1:?usage: patch-phantom.sh PHANTOM_SOURCE_DIR}
h="$dir/include/secretkey.h"
[ -f "$h" ] || { echo "patch-phantom: $h not found (is $dir a Phantom source tree?)" >&2; exit 1; }
grep -q '^    ~PhantomRelinKey() = default;$' "$h" && grep -q '^    ~PhantomGaloisKey() = default;$' "$h" || {
    echo "patch-phantom: $h does not have the expected PhantomRelinKey/PhantomGaloisKey layout" >&2
    exit 1
}
added=0
tmp="$h.fheplan.tmp"
# $1: a word that marks the accessor, $2: the class's destructor line, $3: the sed text
add() {
    grep -q "$1" "$h" && return 0
    sed -e "/^    ~$2() = default;\$/a\\
$3" "$h" >"$tmp"
    mv "$tmp" "$h"
    added=$((added + 1))
}
add 'release_parts()' PhantomRelinKey '\
    // fheplan example accessor: frees the key parts, keeping the pointer table (rebind it)\
    inline void release_parts() { public_keys_.clear(); public_keys_.shrink_to_fit(); }'
add 'part_seed_a(' PhantomRelinKey '\
    // fheplan example accessor: device address of the seed that sampled part i'"'"'s a half\
    [[nodiscard]] inline const uint8_t *part_seed_a(size_t i) const { return public_keys_.at(i).prng_seed_a_.get(); }'
add 'relin_key_mut(' PhantomGaloisKey '\
    // fheplan example accessor: the relinearization key of one Galois element, writable\
    [[nodiscard]] PhantomRelinKey &relin_key_mut(size_t index) { return relin_keys_.at(index); }'
[ "$added" -eq 0 ] || echo "patch-phantom: added $added accessor(s) to $h"
