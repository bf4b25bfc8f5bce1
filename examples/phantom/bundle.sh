#!/bin/sh
# examples/phantom/bundle.sh DIR PROGRAM... — copies the programs into DIR and every shared
# library they load (libPhantom.so among them) into DIR/lib, leaving out the C library and
# the GPU driver, which belong to the GPU host. The programs find DIR/lib by their rpath.
set -eu
dir=${1:?usage: bundle.sh DIR PROGRAM...}
shift
mkdir -p "$dir/lib"
for prog in "$@"; do
    cp -L "$prog" "$dir/"
    ldd "$prog" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | while read -r lib; do
        case ${lib##*/} in
        libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.* | ld-linux*) ;;
        libcuda.so.* | libnvidia*) ;;
        *) cp -L "$lib" "$dir/lib/" ;;
        esac
    done
done
du -sh "$dir" | awk '{ print "bundle: " $2 " holds " $1 }'
