#!/bin/sh
# examples/cheddar/bundle.sh DIR PARAMS PROGRAM... — gathers the Cheddar programs for a GPU
# host that has only its driver: the programs into DIR, every shared library they load
# (libcheddar.so, libcudart.so.13, libtommath.so.1, libfmt.so.9, the C++ runtime, ...) into
# DIR/lib, Cheddar's parameter files (PARAMS/*.json) into DIR/params, and DIR/run.sh,
# which runs a program of the bundle with DIR/lib as its library path and DIR/params as
# CHEDDAR_PARAM_DIR. Every entry is a plain file (links are followed), so the folder can be
# carried as it is. The C library and the GPU driver stay the host's. DIR is made anew.
set -eu
dir=${1:?usage: bundle.sh DIR PARAMS PROGRAM...}
params=${2:?usage: bundle.sh DIR PARAMS PROGRAM...}
shift 2
[ $# -ge 1 ] || { echo "bundle: no program given" >&2; exit 2; }
[ -d "$params" ] || { echo "bundle: $params is not a folder of parameter files" >&2; exit 1; }
rm -rf "$dir"
mkdir -p "$dir/lib" "$dir/params"
for prog in "$@"; do
    [ -x "$prog" ] || { echo "bundle: $prog is not a built program" >&2; exit 1; }
    cp -L "$prog" "$dir/"
    libs=$(ldd "$prog") || { echo "bundle: ldd $prog failed" >&2; exit 1; }
    missing=$(printf '%s\n' "$libs" | awk '/=> not found/ { print $1 }')
    [ -z "$missing" ] || { echo "bundle: $prog needs libraries not found here: $missing" >&2; exit 1; }
    printf '%s\n' "$libs" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | while read -r lib; do
        case ${lib##*/} in
        libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.* | ld-linux*) ;;
        libcuda.so.* | libnvidia*) ;;
        *) cp -L "$lib" "$dir/lib/" ;;
        esac
    done
done
cp -L "$params"/*.json "$dir/params/"
cat >"$dir/run.sh" <<'EOF'
#!/bin/sh
# run.sh PROGRAM [ARG...] — runs a program of this bundle with its libraries and parameters.
here=$(cd "$(dirname "$0")" && pwd)
prog=${1:?usage: run.sh PROGRAM [ARG...]}
shift
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CHEDDAR_PARAM_DIR="${CHEDDAR_PARAM_DIR:-$here/params}"
exec "$here/$(basename "$prog")" "$@"
EOF
chmod +x "$dir/run.sh"
if find "$dir" -type l | grep -q .; then
    echo "bundle: $dir holds links" >&2
    exit 1
fi
du -sh "$dir" | awk '{ print "bundle: " $2 " holds " $1 }'
