#!/bin/bash
# CMake's find_package(MPI) finds gos through gos-cc / gos-c++, as it finds Open MPI through
# mpicc: with MPI_<LANG>_COMPILER pointing at the wrappers (FindMPI asks them -showme:compile
# and -showme:link), and with the wrappers as the compilers themselves (CC=gos-cc). The
# programs built must use gos's MPI, not the Open MPI installed on the machine.
# Usage: find_mpi_check.sh BUILD_BIN_DIR SOURCE_FILE
set -euo pipefail
bin=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$src" "$work/app.c"
cp "$src" "$work/app.cc"
cat > "$work/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.10)
project(find_mpi_check C CXX)
find_package(MPI REQUIRED)
add_executable(app_c app.c)
target_link_libraries(app_c MPI::MPI_C)
add_executable(app_cxx app.cc)
target_link_libraries(app_cxx MPI::MPI_CXX)
CMAKE
check() {
  local dir=$1
  for exe in app_c app_cxx; do
    # Whole outputs first: with pipefail, `nm | grep -q` fails when grep quits early and nm
    # dies of SIGPIPE.
    local syms libs
    syms=$(nm "$dir/$exe")
    libs=$(ldd "$dir/$exe")
    if ! grep -q ' T gos_init' <<<"$syms"; then
      echo "FAIL: $dir/$exe does not contain gos's MPI (no gos_init)" >&2
      exit 1
    fi
    if grep -q 'libmpi' <<<"$libs"; then
      echo "FAIL: $dir/$exe is linked against another MPI:" >&2
      echo "$libs" >&2
      exit 1
    fi
  done
}
# 1. MPI_<LANG>_COMPILER = the wrappers, the compilers left as they are.
cmake -S "$work" -B "$work/b1" -DMPI_C_COMPILER="$bin/gos-cc" -DMPI_CXX_COMPILER="$bin/gos-c++" \
  > "$work/b1.log" 2>&1 || { cat "$work/b1.log" >&2; exit 1; }
grep -q 'Found MPI_C: .*libgos_mpi' "$work/b1.log" || { cat "$work/b1.log" >&2; exit 1; }
cmake --build "$work/b1" > "$work/b1-build.log" 2>&1 || { cat "$work/b1-build.log" >&2; exit 1; }
check "$work/b1"
# 2. The wrappers as the compilers.
CC="$bin/gos-cc" CXX="$bin/gos-c++" cmake -S "$work" -B "$work/b2" > "$work/b2.log" 2>&1 ||
  { cat "$work/b2.log" >&2; exit 1; }
grep -q 'Found MPI_C: .*gos-cc' "$work/b2.log" || { cat "$work/b2.log" >&2; exit 1; }
cmake --build "$work/b2" > "$work/b2-build.log" 2>&1 || { cat "$work/b2-build.log" >&2; exit 1; }
check "$work/b2"
echo "find_package(MPI) finds gos both ways"
