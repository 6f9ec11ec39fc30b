#!/bin/bash
# The profiling interface (docs/mpi.md, "Profiling"): two checks.
#
#   pmpi_check.sh symbols ARCHIVE INCLUDE_DIR CC
#     libgos_mpi.a defines every call as a strong PMPI_<name> and a weak MPI_<name>, for the
#     same names mpi.h declares as MPI_ and as PMPI_ (no more, no fewer, and at least the 232
#     calls the library had when PMPI came); no MPI_ function is strong or undefined in the
#     archive, and no code in it refers to an MPI_ name (the library calls itself through
#     PMPI_ names only, so a tool sees only the program's calls).
#
#   pmpi_check.sh link GOS_CC APP TOOL
#     A tool linked with gos-cc replaces the archive's MPI_ names without a duplicate
#     definition, as objects on the command line and as a static library: `gos-cc app.c
#     tool.c`, `gos-cc app.c libtool.a`. Its MPI_ functions are then the executable's, and the
#     tool defines every MPI_ function the application calls.
set -euo pipefail

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Names (without the prefix) of the lines of `nm` output $1 of type $2 whose symbol is
# $3<Name>: the MPI functions, never MPI_Status or other C++-mangled names.
syms() { awk -v t="$2" -v p="^$3[A-Z][A-Za-z0-9_]*$" 'NF >= 2 && $(NF-1) == t && $NF ~ p {print $NF}' <<<"$1" |
  sed "s/^$3//" | sort -u; }

same() {  # same NAME_A LIST_A NAME_B LIST_B
  if [ "$2" != "$4" ]; then
    diff <(echo "$2") <(echo "$4") | sed 's/^/  /' >&2 || true
    fail "$1 and $3 differ (< only in $1, > only in $3)"
  fi
}

check_symbols() {
  local archive=$1 include=$2 cc=$3
  local nm_out header
  nm_out=$(nm "$archive")
  local pmpi_t mpi_w
  pmpi_t=$(syms "$nm_out" T PMPI_)
  mpi_w=$(syms "$nm_out" W MPI_)
  for t in T U t; do
    local bad
    bad=$(syms "$nm_out" "$t" MPI_)
    [ -z "$bad" ] || fail "MPI_ functions of type $t in the archive (want W only): $bad"
  done
  # The prototypes, comments gone: a declaration's name is the identifier before its first '('.
  header=$(echo '#include <mpi.h>' | "$cc" -E -P -I"$include" -x c - | tr '\n' ' ' | tr ';' '\n' |
    grep -v '^ *typedef' | sed -nE 's/^[^(]*\b(P?MPI_[A-Za-z0-9_]+) *\(.*/\1/p')
  local h_mpi h_pmpi
  h_mpi=$(grep '^MPI_' <<<"$header" | sed 's/^MPI_//' | sort -u)
  h_pmpi=$(grep '^PMPI_' <<<"$header" | sed 's/^PMPI_//' | sort -u)
  same "mpi.h's MPI_ prototypes" "$h_mpi" "its PMPI_ prototypes" "$h_pmpi"
  same "mpi.h's MPI_ prototypes" "$h_mpi" "the archive's T PMPI_ symbols" "$pmpi_t"
  same "the archive's T PMPI_ symbols" "$pmpi_t" "its W MPI_ symbols" "$mpi_w"
  local n
  n=$(wc -l <<<"$pmpi_t")
  [ "$n" -ge 232 ] || fail "only $n PMPI_ functions (232 when the profiling interface came)"
  # Relocations name the symbol a piece of code refers to: an MPI_ one is a call (or address)
  # that a tool's MPI_ function would intercept.
  local relocs
  relocs=$(objdump -r "$archive" | awk '$3 ~ /^MPI_[A-Z][A-Za-z0-9_]*([-+]0x[0-9a-f]+)?$/ {print $3}' |
    sed -E 's/[-+]0x.*//' | sort -u)
  [ -z "$relocs" ] || fail "the library refers to MPI_ names (use the PMPI_ ones): $relocs"
  echo "OK: $n functions, each a T PMPI_ and a W MPI_ symbol, declared both ways in mpi.h;" \
    "no reference to an MPI_ name inside the archive"
}

check_link() {
  local gos_cc=$1 app=$2 tool=$3
  work=$(mktemp -d)  # global: the EXIT trap runs after this function has returned
  trap 'rm -rf "$work"' EXIT
  "$gos_cc" -std=c11 -Wall -Wextra -Werror -O1 -c -o "$work/app.o" "$app"
  "$gos_cc" -std=c11 -Wall -Wextra -Werror -O1 -c -o "$work/tool.o" "$tool"
  local tool_nm wanted missing
  tool_nm=$(nm "$work/tool.o")
  wanted=$(syms "$(nm "$work/app.o")" U MPI_)
  missing=$(comm -23 <(echo "$wanted") <(syms "$tool_nm" T MPI_))
  [ -z "$missing" ] || fail "the tool does not count these MPI calls of the program: $missing"
  ar rcs "$work/libtool.a" "$work/tool.o"
  local how exe exe_nm
  for how in objects sources archive; do
    exe=$work/app_$how
    case $how in
      objects) "$gos_cc" -o "$exe" "$work/app.o" "$work/tool.o" ;;
      sources) "$gos_cc" -std=c11 -O1 -o "$exe" "$app" "$tool" ;;
      archive) "$gos_cc" -o "$exe" "$work/app.o" -L"$work" -ltool ;;
    esac
    exe_nm=$(nm "$exe")
    # The tool's MPI_ functions are strong (T); gos's weak ones must all have given way.
    local tool_fns got
    tool_fns=$(syms "$tool_nm" T MPI_)
    got=$(comm -12 <(echo "$tool_fns") <(syms "$exe_nm" T MPI_))
    same "the tool's MPI_ functions" "$tool_fns" "the strong MPI_ functions of app_$how" "$got"
    [ -n "$(syms "$exe_nm" T PMPI_)" ] || fail "app_$how has no PMPI_ functions"
  done
  echo "OK: the tool's $(wc -l <<<"$tool_fns") MPI_ functions replace gos's when linked as" \
    "objects, as sources and as a static library; they cover the program's" \
    "$(wc -l <<<"$wanted") MPI functions"
}

case ${1:-} in
  symbols) check_symbols "$2" "$3" "$4" ;;
  link) check_link "$2" "$3" "$4" ;;
  *) fail "usage: $0 symbols ARCHIVE INCLUDE_DIR CC | link GOS_CC APP TOOL" ;;
esac
