#!/bin/bash
# The Fortran bindings (docs/mpi.md, "Fortran"): three checks.
#
#   fortran_check.sh symbols ARCHIVE GEN_BINDINGS_PY
#     libgos_mpif.a defines every call of gen_bindings.py's table (and the hand-written ones)
#     as a strong pmpi_<name>_ with weak mpi_<name>_ and mpi_<name>__ aliases, no strong
#     mpi_ name, and calls the C library through PMPI_ names only (no MPI_ function is
#     undefined in it), so that a tool sees a Fortran call once.
#
#   fortran_check.sh constants GOS_FORT
#     mpif.h and the mpi module give Fortran the values mpi.h gives C: a Fortran program
#     writes its constants, a C program (built with gos-fort too) its own, and they agree.
#
#   fortran_check.sh find_package GOS_BIN_DIR
#     CMake's find_package(MPI COMPONENTS Fortran) finds gos through gos-fort, with mpif.h
#     and the mpi module (configure step only), both as MPI_Fortran_COMPILER and as FC.
set -euo pipefail

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

check_symbols() {
  local archive=$1 gen=$2 nm_out
  nm_out=$(nm "$archive")
  local strong weak weak2
  strong=$(awk 'NF >= 2 && $(NF-1) == "T" && $NF ~ /^pmpi_[a-z0-9_]*_$/ {print $NF}' <<<"$nm_out" |
    sed 's/^pmpi_//; s/_$//' | sort -u)
  weak=$(awk 'NF >= 2 && $(NF-1) == "W" && $NF ~ /^mpi_[a-z0-9_]*[a-z0-9]_$/ {print $NF}' <<<"$nm_out" |
    sed 's/^mpi_//; s/_$//' | sort -u)
  weak2=$(awk 'NF >= 2 && $(NF-1) == "W" && $NF ~ /^mpi_[a-z0-9_]*__$/ {print $NF}' <<<"$nm_out" |
    sed 's/^mpi_//; s/__$//' | sort -u)
  [ "$strong" = "$weak" ] || { diff <(echo "$strong") <(echo "$weak") >&2 || true; fail "pmpi_ and weak mpi_ names differ"; }
  [ "$strong" = "$weak2" ] || fail "pmpi_ and weak mpi_*__ names differ"
  local n
  n=$(wc -l <<<"$strong")
  [ "$n" -ge 190 ] || fail "only $n Fortran calls"
  if awk 'NF >= 2 && $(NF-1) == "T" && $NF ~ /^mpi_/' <<<"$nm_out" | grep -q .; then
    fail "strong mpi_ names in $archive"
  fi
  local undefined
  undefined=$(awk '$1 == "U" && $2 ~ /^MPI_[A-Z][a-z]/ {print $2}' <<<"$nm_out" | sort -u)
  [ -z "$undefined" ] || fail "the bindings call MPI_ names (a C tool would count Fortran calls twice): $undefined"
  # Every call of the table (its lines start with a capitalized call name) is there.
  local table
  table=$(sed -n '/^CALLS = """/,/^"""/p' "$gen" | grep -E '^[A-Z][a-z]' | awk '{print tolower($1)}' | sort -u)
  local missing
  missing=$(comm -23 <(echo "$table") <(echo "$strong"))
  [ -z "$missing" ] || fail "calls of the table missing from $archive: $missing"
  for hand in init init_thread wtime wtick comm_get_attr attr_get buffer_detach; do
    grep -qx "$hand" <<<"$strong" || fail "no pmpi_${hand}_"
  done
  echo "$n Fortran calls, each pmpi_<name>_ with weak mpi_<name>_ and mpi_<name>__"
}

# The constants compared, by name.
NAMES="MPI_COMM_WORLD MPI_COMM_SELF MPI_COMM_NULL MPI_ANY_SOURCE MPI_ANY_TAG MPI_PROC_NULL
MPI_UNDEFINED MPI_SUCCESS MPI_ERR_RANK MPI_ERR_TRUNCATE MPI_ERR_LASTCODE MPI_SUM MPI_MAXLOC
MPI_LAND MPI_REPLACE MPI_INTEGER MPI_REAL MPI_DOUBLE_PRECISION MPI_COMPLEX MPI_DOUBLE_COMPLEX
MPI_LOGICAL MPI_CHARACTER MPI_2INTEGER MPI_2REAL MPI_2DOUBLE_PRECISION MPI_INTEGER8 MPI_BYTE
MPI_PACKED MPI_INT MPI_DOUBLE MPI_MAX_PROCESSOR_NAME MPI_MAX_ERROR_STRING MPI_MAX_OBJECT_NAME
MPI_REQUEST_NULL MPI_INFO_NULL MPI_ERRORS_RETURN MPI_IDENT MPI_CONGRUENT MPI_ORDER_FORTRAN
MPI_TAG_UB MPI_THREAD_FUNNELED MPI_KEYVAL_INVALID MPI_VERSION MPI_SUBVERSION"

check_constants() {
  local fort=$1
  {
    echo "program constants"
    echo "  use mpi"
    echo "  implicit none"
    for n in $NAMES; do echo "  print '(A, 1X, I0)', '$n', $n"; done
    echo "  print '(A, 1X, I0)', 'MPI_STATUS_SIZE', MPI_STATUS_SIZE"
    echo "  print '(A, 1X, I0)', 'MPI_ADDRESS_KIND', MPI_ADDRESS_KIND"
    echo "end program constants"
  } >"$work/constants.f90"
  {
    echo "      program constants77"
    echo "      implicit none"
    echo "      include 'mpif.h'"
    for n in $NAMES; do echo "      print '(A, 1X, I0)', '$n', $n"; done
    echo "      print '(A, 1X, I0)', 'MPI_STATUS_SIZE', MPI_STATUS_SIZE"
    echo "      print '(A, 1X, I0)', 'MPI_ADDRESS_KIND', MPI_ADDRESS_KIND"
    echo "      end"
  } >"$work/constants77.f"
  {
    echo "#include <mpi.h>"
    echo "#include <stdio.h>"
    echo "int main(void) {"
    for n in $NAMES; do echo "  printf(\"%s %lld\\n\", \"$n\", (long long)($n));"; done
    echo "  printf(\"MPI_STATUS_SIZE %d\\n\", MPI_F_STATUS_SIZE);"
    echo "  printf(\"MPI_ADDRESS_KIND %d\\n\", (int)sizeof(MPI_Aint));"
    echo "  return 0;"
    echo "}"
  } >"$work/constants.c"
  (cd "$work" && "$fort" -o f90 constants.f90 && "$fort" -ffixed-line-length-none -o f77 constants77.f &&
    "$fort" -o c constants.c) || fail "the constant programs do not build"
  "$work/c" >"$work/c.out"
  "$work/f90" >"$work/f90.out"
  "$work/f77" >"$work/f77.out"
  diff "$work/c.out" "$work/f90.out" >&2 || fail "the mpi module's constants differ from mpi.h's"
  diff "$work/c.out" "$work/f77.out" >&2 || fail "mpif.h's constants differ from mpi.h's"
  echo "$(wc -l <"$work/c.out") constants agree in C, mpif.h and the mpi module"
}

check_find_package() {
  local bin=$1
  cat >"$work/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.10)
project(find_mpi_fortran_check Fortran)
find_package(MPI REQUIRED COMPONENTS Fortran)
message(STATUS "gos check: F77=${MPI_Fortran_HAVE_F77_HEADER} F90=${MPI_Fortran_HAVE_F90_MODULE}")
CMAKE
  cmake -S "$work" -B "$work/b1" -DMPI_Fortran_COMPILER="$bin/gos-fort" >"$work/b1.log" 2>&1 ||
    { cat "$work/b1.log" >&2; fail "configure with MPI_Fortran_COMPILER=gos-fort"; }
  grep -q 'Found MPI_Fortran: .*libgos_mpif' "$work/b1.log" || { cat "$work/b1.log" >&2; fail "not gos's MPI"; }
  grep -q 'gos check: F77=TRUE F90=TRUE' "$work/b1.log" || { cat "$work/b1.log" >&2; fail "no mpif.h or mpi module"; }
  FC="$bin/gos-fort" cmake -S "$work" -B "$work/b2" >"$work/b2.log" 2>&1 ||
    { cat "$work/b2.log" >&2; fail "configure with FC=gos-fort"; }
  grep -q 'Found MPI_Fortran: .*gos-fort' "$work/b2.log" || { cat "$work/b2.log" >&2; fail "FC=gos-fort"; }
  grep -q 'gos check: F77=TRUE F90=TRUE' "$work/b2.log" || { cat "$work/b2.log" >&2; fail "FC=gos-fort: no mpif.h or mpi module"; }
  echo "find_package(MPI COMPONENTS Fortran) finds gos both ways"
}

case "${1:-}" in
  symbols) check_symbols "$2" "$3" ;;
  constants) check_constants "$2" ;;
  find_package) check_find_package "$2" ;;
  *) echo "usage: fortran_check.sh symbols ARCHIVE GEN_BINDINGS_PY | constants GOS_FORT | find_package BIN_DIR" >&2; exit 2 ;;
esac
