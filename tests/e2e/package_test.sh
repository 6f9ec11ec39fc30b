#!/usr/bin/env bash
# The Debian package in a fresh Debian 12 (issue 28 item 1, docs/install.md): builds the .deb
# with scripts/package, makes a minimal bookworm root with debootstrap from the mirror this
# machine's apt uses, installs the package's dependencies from that mirror (only Debian's
# packages) and notes every file of the root; installs the .deb with apt; in a chroot (with
# /proc, /sys and its cgroup file systems, /dev, and tmpfs /run and /tmp) compiles the Jacobi
# example with gos-cc and runs it with `gos-run --checkpoint`, which must commit epochs with
# the package's own CRIU (the root has no other); writes /etc/gos/gos.conf and starts the
# coordinator and a nodeagent as their installed systemd units would, and runs the job with
# --checkpoint on them; purges the package and checks that the root holds exactly the files it
# held before.
#
# Slow (minutes: debootstrap, apt): ctest label `slow`, not run by scripts/test.
#   ctest --test-dir build -L slow --output-on-failure
# or: tests/e2e/package_test.sh [SOURCE_DIR]
# Exit 0 passed, 1 failed, 77 skipped (the reason is printed: no root, no debootstrap, no
# bookworm mirror in the apt sources, or the mirror cannot be reached).
set -euo pipefail

src=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
skip() { echo "package_test: SKIP: $*"; exit 77; }
fail() { echo "package_test: FAIL: $*" >&2; exit 1; }
log() { echo "package_test: [$(($(date +%s) - start))s] $*"; }
start=$(date +%s)

[ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap, chroot, mounts)"
command -v debootstrap >/dev/null || skip "debootstrap is not installed (scripts/setup installs it)"

# Every mount below is made in a mount namespace of this script's own, so none can reach the
# host's mount table (an unmount of the chroot's bind of /sys must not propagate to /sys).
if [ -z "${GOS_PACKAGE_TEST_NS:-}" ]; then
  exec env GOS_PACKAGE_TEST_NS=1 unshare --mount --propagation private -- "$0" "$src"
fi

# The machine's Debian mirror, from its own apt sources (deb822 or one-line), as scripts/setup
# finds it: no archive host is written into this repository.
mirror=$(
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    awk 'BEGIN{RS=""; FS="\n"}
         { uri=""; suites=""; types="";
           for (i = 1; i <= NF; i++) {
             if ($i ~ /^URIs:/)   { sub(/^URIs:[ \t]*/, "", $i); split($i, u, /[ \t]+/); uri = u[1] }
             if ($i ~ /^Suites:/) { suites = $i }
             if ($i ~ /^Types:/)  { types = $i }
           }
           if (types ~ /(^|[ \t:])deb([ \t]|$)/ && suites ~ /[ \t]bookworm([ \t]|$)/ && uri != "") { print uri; exit } }' "$f"
  done
  if [ -r /etc/apt/sources.list ]; then
    awk '$1 == "deb" && $0 ~ / bookworm / {
           for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' /etc/apt/sources.list
  fi
)
mirror=$(echo "$mirror" | head -n 1)
[ -n "$mirror" ] || skip "no bookworm 'deb' entry in /etc/apt/sources.list{,.d}: no mirror for debootstrap"
if ! err=$(curl -fsS --max-time 20 -o /dev/null "$mirror/dists/bookworm/Release" 2>&1); then
  skip "the mirror $mirror (from the apt sources) cannot be reached: $err"
fi

work=$(mktemp -d /var/tmp/gos-package-test.XXXXXX)
root=$work/root
cleanup() {
  local m
  # Innermost first; a bind of /sys or /dev must be gone before anything is removed.
  for m in $(findmnt -rn -o TARGET | grep "^$root\(/\|$\)" | sort -r); do umount -l "$m" 2>/dev/null || true; done
  if findmnt -rn -o TARGET | grep -q "^$root\(/\|$\)"; then
    echo "package_test: leaving $work: mounts remain under it" >&2
  else
    rm -rf --one-file-system "$work"
  fi
}
trap cleanup EXIT

log "building the package (scripts/package)"
# In scripts/package's own build dir (<src>/build-package): incremental after the first time.
deb=$("$src/scripts/package") || fail "scripts/package failed"
log "$deb"

log "debootstrap --variant=minbase bookworm from $mirror"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { tail -n 30 "$work/debootstrap.log"; fail "debootstrap failed (log above)"; }

mount --bind "$root" "$root"
mkdir "$root/.oldroot"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"   # with the cgroup file systems (the freezer) under it
mount --rbind /dev "$root/dev"   # with /dev/shm (the ranks' BCS channels) and /dev/pts
mount -t tmpfs tmpfs "$root/run"
mount -t tmpfs tmpfs "$root/tmp"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  DEBIAN_FRONTEND=noninteractive "$@"; }
# As in_root, but with the root as the root of a mount namespace of its own (pivot_root), as on
# a host or in a container: CRIU dumps a process's mounts and finds no parent for the mounts of
# a mere chroot. (The root is a mount point of its own, and has .oldroot, from the start.)
# With unshare_net=--net, in a network namespace of its own too.
in_root_pivoted() {
  unshare ${unshare_net:-} --mount --propagation private -- bash -c \
    'cd "$1" && mkdir -p .oldroot && pivot_root . .oldroot && umount -l /.oldroot && shift &&
     exec /usr/sbin/chroot / /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
       LANG=C.UTF-8 "$@"' pivot "$root" "$@"
}

log "installing the package's dependencies from $mirror"
depends=$(dpkg-deb -f "$deb" Depends)
recommends=$(dpkg-deb -f "$deb" Recommends)
in_root apt-get update -qq >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "apt-get update in the root"; }
# The example is compiled in the root: what gos recommends for gos-cc (a compiler, libstdc++)
# besides what it depends on.
in_root apt-get satisfy -y -qq --no-install-recommends "$depends, $recommends" >>"$work/apt.log" 2>&1 ||
  { tail -n 30 "$work/apt.log"; fail "apt-get satisfy '$depends, $recommends'"; }

# Every file and directory of the root but what apt, dpkg and the logs keep about themselves.
snapshot() {
  (cd "$root" && find . -xdev \( -path ./proc -o -path ./sys -o -path ./dev -o -path ./run \
      -o -path ./tmp -o -path ./var/lib/dpkg -o -path ./var/lib/apt -o -path ./var/cache \
      -o -path ./var/log \) -prune -o -print | sort)
}
snapshot >"$work/before"

log "apt-get install ./$(basename "$deb")"
cp "$deb" "$root/tmp/gos.deb"
in_root apt-get install -y -qq --no-install-recommends /tmp/gos.deb >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "apt-get install of the package"; }
grep -q "^ii  gos " <(in_root dpkg -l gos) || fail "gos is not installed in the root"
if in_root sh -c 'command -v criu'; then fail "the root has a criu on PATH: the test needs none"; fi

log "gos-cc and gos-run --checkpoint in the root"
cp "$src/examples/jacobi.c" "$root/tmp/jacobi.c"
out=$(in_root_pivoted GOS_STATE_DIR=/tmp/gos-state bash -c '
  set -e; cd /tmp
  gos-cc -O2 -std=c11 -D_DEFAULT_SOURCE -o jacobi jacobi.c -lm
  gos-run -n 2 --checkpoint=100ms ./jacobi 64 5000 100' 2>&1) ||
  { echo "$out"; fail "gos-run --checkpoint in the root failed"; }
echo "$out" | tail -n 3
grep -q "checkpoint: job 1 epoch 1 committed: 2 ranks" <<<"$out" || { echo "$out"; fail "no checkpoint committed"; }
grep -q "jacobi: N=64 ranks=2 iterations=5000" <<<"$out" || { echo "$out"; fail "no answer from jacobi"; }

# The admin's way (docs/install.md): /etc/gos/gos.conf, and the daemons started as their
# installed units start them (their Environment=, ExecStartPre= and ExecStart= lines, run here
# by hand: no systemd runs in the root), in a network namespace of their own (a fixed port).
log "the daemons as their systemd units run them, and gos-run --checkpoint on them"
cat >"$root/etc/gos/gos.conf" <<'CONF'
listen = "127.0.0.1:7411"
coordinator = "127.0.0.1:7411"
key_file = "/var/lib/gos/cluster.key"
nodes = 1
CONF
out=$(unshare_net=--net in_root_pivoted bash -c '
  set -e; ip link set lo up; cd /tmp
  unit() { sed -n "s/^$2=//p" "/usr/lib/systemd/system/gos-$1.service"; }
  export $(unit coordinator Environment)
  while read -r pre; do sh -c "$pre"; done < <(unit nodeagent ExecStartPre)
  mountpoint -q /run/gos/freezer
  $(unit coordinator ExecStart) 2>/tmp/coordinator.log & coordinator=$!
  for i in $(seq 100); do [ -e /var/lib/gos/cluster.key ] && break; sleep 0.1; done
  $(unit nodeagent ExecStart) 2>/tmp/nodeagent.log & nodeagent=$!
  rc=0; gos-run -n 2 --checkpoint=100ms ./jacobi 64 5000 100 || rc=$?
  gos-ps | tail -n 2
  kill $nodeagent $coordinator; wait $nodeagent $coordinator || true
  [ $rc = 0 ] || { tail -n 5 /tmp/coordinator.log /tmp/nodeagent.log; exit $rc; }' 2>&1) ||
  { echo "$out"; fail "gos-run --checkpoint on the daemons of the units failed"; }
echo "$out" | tail -n 4
grep -q "checkpoint: job 1 epoch 1 committed: 2 ranks" <<<"$out" || { echo "$out"; fail "no checkpoint committed"; }
[ -d "$root/var/lib/gos" ] || fail "the coordinator kept nothing in /var/lib/gos"

log "apt-get purge gos"
in_root apt-get purge -y -qq gos >"$work/purge.log" 2>&1 || { cat "$work/purge.log"; fail "apt-get purge gos"; }
snapshot >"$work/after"
if ! diff "$work/before" "$work/after" >"$work/diff"; then
  cat "$work/diff"
  fail "the root's files differ after purging gos (< before, > after)"
fi
log "PASS: installed, ran gos-run --checkpoint, purged without a trace ($(wc -l <"$work/before") paths compared)"
