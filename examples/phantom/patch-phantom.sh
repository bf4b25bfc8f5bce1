#!/bin/sh
# examples/phantom/patch-phantom.sh DIR — the one edit the example makes to the user's own
# Phantom tree, at build time: two inline accessors in include/secretkey.h. A Galois key's
# relinearization keys become reachable for writing (PhantomGaloisKey::relin_key_mut), and a
# relinearization key can free its own parts while keeping the device pointer table that
# key switching reads (PhantomRelinKey::release_parts), so that an outside owner (fheplan)
# can hold the key bytes and bind their pointers. Header-only: the built libPhantom.so is
# the same with or without it. Idempotent: a patched tree is left as it is.
set -eu
dir=${1:?usage: patch-phantom.sh PHANTOM_SOURCE_DIR}
h="$dir/include/secretkey.h"
[ -f "$h" ] || { echo "patch-phantom: $h not found (is $dir a Phantom source tree?)" >&2; exit 1; }
if grep -q 'fheplan example accessor' "$h"; then
    exit 0
fi
grep -q '^    ~PhantomRelinKey() = default;$' "$h" && grep -q '^    ~PhantomGaloisKey() = default;$' "$h" || {
    echo "patch-phantom: $h does not have the expected PhantomRelinKey/PhantomGaloisKey layout" >&2
    exit 1
}
tmp="$h.fheplan.tmp"
sed -e '/^    ~PhantomRelinKey() = default;$/a\
\
    // fheplan example accessor: frees the key parts, keeping the pointer table (rebind it)\
    inline void release_parts() { public_keys_.clear(); public_keys_.shrink_to_fit(); }' \
    -e '/^    ~PhantomGaloisKey() = default;$/a\
\
    // fheplan example accessor: the relinearization key of one Galois element, writable\
    [[nodiscard]] PhantomRelinKey &relin_key_mut(size_t index) { return relin_keys_.at(index); }' \
    "$h" > "$tmp"
mv "$tmp" "$h"
echo "patch-phantom: added two accessors to $h"
