#!/bin/sh
# tests/mpi/bundle.sh DIR [FHEPLAN] — carries fheplan and the Open MPI runtime it was
# built with (mpirun = orterun, orted, the MCA plugins, the help texts and every shared
# library they need) to a GPU host that has neither, relocated with OPAL_PREFIX. Then:
#   DIR/mpirun -n 2 fheplan run DIR/plans/ckks-bootstrap.rplan
# (DIR/mpirun puts DIR on PATH). CUDA is linked statically; the host's driver is used.
set -eu
dir=$1
fp=${2:-build/fheplan}
ompi=/usr/lib/x86_64-linux-gnu/openmpi
mkdir -p "$dir/lib" "$dir/usr/bin" "$dir/usr/share" "$dir${ompi%/openmpi}"
cp -L "$fp" "$dir/fheplan"
cp -rL "$ompi" "$dir$ompi"
cp -L /usr/bin/orterun /usr/bin/orted "$dir/usr/bin/"
cp -rL /usr/share/openmpi "$dir/usr/share/"
cp -r plans tests/mpi "$dir/" 2>/dev/null || true
# every shared library of the binaries and plugins, except the C library and the driver
find "$dir/fheplan" "$dir/usr/bin" "$dir$ompi" -type f \( -name '*.so*' -o -perm -u+x \) |
  while read -r f; do ldd "$f" 2>/dev/null | awk '/=> \//{print $3}'; done | sort -u |
  while read -r lib; do
    case "${lib##*/}" in
      libc.so.*|ld-linux*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*) ;;
      libcuda.so.*|libnvidia*) ;;
      *) [ -e "$dir/lib/${lib##*/}" ] || cp -L "$lib" "$dir/lib/" ;;
    esac
  done
cat > "$dir/mpirun" <<'SH'
#!/bin/sh
# Open MPI's mpirun from this bundle (OPAL_PREFIX relocates /usr to here/usr).
here=$(cd "$(dirname "$0")" && pwd)
export OPAL_PREFIX="$here/usr" PATH="$here:$here/usr/bin:$PATH"
export LD_LIBRARY_PATH="$here/lib:$here/usr/lib/x86_64-linux-gnu/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader} OMPI_MCA_btl_vader_single_copy_mechanism=none
exec "$here/usr/bin/orterun" --allow-run-as-root -x LD_LIBRARY_PATH -x PATH -x OPAL_PREFIX "$@"
SH
chmod +x "$dir/mpirun"
du -sh "$dir" | awk '{print "bundle: " $2 " holds " $1}'
