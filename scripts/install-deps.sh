#!/usr/bin/env bash
# Installs the Debian packages Joiner's tests need, only those missing.
# Needs root (CI runs as root); without root it says what is missing and goes on,
# and the tests that need a missing tool skip with a message naming it.
set -euo pipefail

# command -> Debian package
declare -A want=(
  [openssl]=openssl
  # agent/volumes loop-device tests (data volumes, signatures, RAID0, units)
  [losetup]=mount
  [blkid]=util-linux
  [wipefs]=util-linux
  [sfdisk]=fdisk
  [sgdisk]=gdisk
  [mkfs.xfs]=xfsprogs
  [xfs_repair]=xfsprogs
  [mkfs.ext4]=e2fsprogs
  [e2fsck]=e2fsprogs
  [mkswap]=util-linux
  [mdadm]=mdadm
  [pvcreate]=lvm2
  [cryptsetup]=cryptsetup-bin
  [systemd-analyze]=systemd
  # cmd/joiner `joiner top` test drives the terminal view in a tmux pane
  [tmux]=tmux
)

missing=()
for cmd in "${!want[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${want[$cmd]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0

mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "$(id -u)" != 0 ]; then
  echo "install-deps: not root; missing packages: ${missing[*]} (tests needing them will skip)" >&2
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
