#!/usr/bin/env bash
# Builds gos's own CRIU: CRIU 4.1.1 from Debian's source tarball with this tree's
# scripts/criu-patches, into OUT (cmake/GosCriu.cmake's target gos-criu; docs/install.md).
#   cmake/build-criu.sh TARBALL WORKDIR OUT PATCH...
# The build's log is WORKDIR/build.log; its last lines are printed if it fails.
set -euo pipefail
tarball=$1 work=$2 out=$3
shift 3
rm -rf "$work/criu-4.1.1"
mkdir -p "$work"
tar -C "$work" -xf "$tarball"
cd "$work/criu-4.1.1"
for p in "$@"; do
  patch -p1 -s <"$p" || { echo "build-criu: cannot apply $p to CRIU 4.1.1" >&2; exit 1; }
done
cc=gcc
command -v ccache >/dev/null 2>&1 && cc="ccache gcc"
if ! make -j"$(nproc)" CC="$cc" criu >"$work/build.log" 2>&1; then
  tail -n 40 "$work/build.log" >&2
  echo "build-criu: CRIU build failed (log: $work/build.log)" >&2
  exit 1
fi
install -m 0755 criu/criu "$out"
