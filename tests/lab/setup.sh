#!/usr/bin/env bash
# setup.sh: prepares the soft-RoCE lab (docs/lab.md) that tests/lab/run.sh
# boots. The lab runs chorus' verbs code against a real kernel verbs stack on
# machines that have no RDMA hardware: Debian's stock kernel, whose modules
# include rdma_rxe (soft-RoCE), under qemu.
#
# Idempotent: a step whose output exists is skipped, so a second run costs a
# second or two and needs no network.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: tests/lab/setup.sh [--cache DIR] [--kernel-package NAME] [--no-apt] [--rebuild]

Prepares the soft-RoCE lab used by tests/lab/run.sh and `ctest -L lab`:
  1. installs the host packages the lab needs (qemu, busybox, vde2, the
     RDMA userland the guest runs, ...) unless --no-apt; needs root then;
  2. downloads Debian's stock kernel package (linux-image-<version>-amd64)
     and unpacks it into the cache: unpacked, never installed on the host;
  3. takes the uncompressed kernel out of its bzImage (qemu boots it through
     the PVH entry point, seconds faster under emulation);
  4. builds the base initramfs: busybox and the modules needed to mount the
     host's root filesystem over virtio-9p.

Options:
  --cache DIR            cache directory (default $CHORUS_LAB_CACHE, else
                         /var/cache/chorus-lab); run.sh reads the same
  --kernel-package NAME  kernel package to use (default: the one the
                         linux-image-amd64 metapackage depends on)
  --no-apt               do not install host packages (report what is missing)
  --rebuild              redo every step (e.g. to move to a newer kernel)
  -h, --help             this text

Needs about 450 MB in the cache (mostly the kernel's module tree).
USAGE
}

cache=${CHORUS_LAB_CACHE:-/var/cache/chorus-lab}
kernel_package=
use_apt=1
rebuild=0
while (($#)); do
  case $1 in
    --cache) cache=${2:?--cache needs a directory}; shift 2 ;;
    --kernel-package) kernel_package=${2:?--kernel-package needs a name}; shift 2 ;;
    --no-apt) use_apt=0; shift ;;
    --rebuild) rebuild=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "setup.sh: unknown argument \"$1\" (see --help)" >&2; exit 2 ;;
  esac
done

log() { printf 'lab setup: %s\n' "$*" >&2; }
die() { printf 'lab setup: error: %s\n' "$*" >&2; exit 1; }

# The cache path travels on the guest kernel's command line, which splits on
# spaces.
[[ $cache == /* && $cache != *[[:space:]]* ]] \
  || die "the cache directory must be an absolute path without spaces (got \"$cache\")"

# ------------------------------------------------------------- host packages
# qemu-system-x86: the emulator. busybox-static: the initramfs' userland.
# kmod, cpio, xz-utils, zstd: module dependencies, initramfs packing, the
# kernel's compressed image. vde2: the virtual switch between several guests.
# The rest runs inside the guest, which uses the host's root filesystem: the
# RDMA userland (libibverbs with the rxe provider, librdmacm, libfabric) and
# the tools the guest's setup calls (ip, rdma, tc).
packages=(qemu-system-x86 busybox-static kmod cpio gzip xz-utils zstd vde2
          iproute2 rdma-core ibverbs-providers ibverbs-utils rdmacm-utils
          libibverbs-dev librdmacm-dev libfabric-bin libfabric-dev perftest)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' \
    || missing+=("$package")
done
if ((${#missing[@]})); then
  ((use_apt)) || die "missing packages: ${missing[*]} (run without --no-apt as root)"
  [[ $(id -u) == 0 ]] || die "missing packages: ${missing[*]}; run as root to install them"
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

mkdir -p "$cache" 2>/dev/null || die "cannot create $cache (run as root, or --cache DIR)"
[[ -w $cache ]] || die "$cache is not writable (run as root, or --cache DIR)"
if ((rebuild)); then
  rm -rf "$cache/kernel.env" "$cache/kroot" "$cache"/vmlinux-* "$cache/base-initrd.cpio.gz"
fi

# -------------------------------------------------------------------- kernel
# Downloaded with apt (the same mirror and keys as every other package) and
# unpacked with dpkg -x: the host keeps its own kernel and boot setup.
if [[ ! -s $cache/kernel.env ]]; then
  if [[ -z $kernel_package ]]; then
    depends_on_kernel() {
      apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'
    }
    kernel_package=$(depends_on_kernel)
    if [[ -z $kernel_package && $(id -u) == 0 ]]; then
      apt-get update -qq
      kernel_package=$(depends_on_kernel)
    fi
    [[ -n $kernel_package ]] \
      || die "apt-cache does not know linux-image-amd64 (apt-get update as root, or --kernel-package NAME)"
  fi
  kernel_version=${kernel_package#linux-image-}
  log "downloading $kernel_package (unpacked into $cache/kroot, not installed)"
  download=$(mktemp -d "$cache/download.XXXXXX")
  # As root, apt-get download warns that it cannot drop privileges to _apt
  # for a directory _apt cannot write; the download is still verified.
  (cd "$download" && apt-get download -q "$kernel_package" >&2) \
    || { rm -rf "$download"; die "apt-get download $kernel_package failed"; }
  rm -rf "$cache/kroot"
  dpkg -x "$download"/*.deb "$cache/kroot"
  rm -rf "$download"
  # The package's postinst would run depmod; modprobe in the guest needs its
  # index.
  depmod -b "$cache/kroot" "$kernel_version"
  [[ -f $cache/kroot/boot/vmlinuz-$kernel_version ]] || die "$kernel_package has no boot/vmlinuz-$kernel_version"
  modprobe -d "$cache/kroot" -S "$kernel_version" --show-depends rdma_rxe >/dev/null 2>&1 \
    || die "$kernel_package has no rdma_rxe module: the lab needs soft-RoCE"
  printf 'kernel_version=%s\nkernel_package=%s\n' "$kernel_version" "$kernel_package" > "$cache/kernel.env"
  rm -f "$cache/base-initrd.cpio.gz"
fi
# shellcheck source=/dev/null
. "$cache/kernel.env"

# ------------------------------------------------------------------- vmlinux
# The bzImage holds the kernel ELF as an xz stream. That ELF has a PVH entry
# note, so qemu -kernel starts it directly: no real-mode setup and no
# decompression inside the emulated guest, about 3 s saved per boot under
# TCG. When extraction fails, run.sh boots the bzImage instead.
vmlinux=$cache/vmlinux-$kernel_version
if [[ ! -s $vmlinux ]]; then
  bzimage=$cache/kroot/boot/vmlinuz-$kernel_version
  offset=$(LC_ALL=C grep -m1 -obUaP '\xfd7zXZ\x00' "$bzimage" | head -n1 | cut -d: -f1 || true)
  # Through a file, not a pipe: xz stops reading at the end of the first
  # stream, and the writer's SIGPIPE would fail the pipeline.
  if [[ -n $offset ]] \
     && tail -c +$((offset + 1)) "$bzimage" > "$vmlinux.xz" \
     && xz -dcq --single-stream "$vmlinux.xz" > "$vmlinux.tmp" \
     && [[ $(head -c4 "$vmlinux.tmp" | od -An -tx1 | tr -d ' \n') == 7f454c46 ]]; then
    mv "$vmlinux.tmp" "$vmlinux"
    rm -f "$vmlinux.xz"
  else
    rm -f "$vmlinux.tmp" "$vmlinux.xz"
    log "no ELF kernel inside the bzImage; run.sh will boot the bzImage (slower)"
  fi
fi

# ---------------------------------------------------------- base initramfs
# busybox and the modules that mount the host's root: nothing else. rdma_rxe
# and the rest are loaded later by the guest's modprobe from the module tree
# in the cache, over 9p. The guest's /init is not in here: run.sh appends it
# from the source tree at every boot (the kernel unpacks concatenated
# archives), so a changed init never needs this cache rebuilt.
initrd_modules=(virtio_pci virtio_console 9pnet_virtio 9p overlay)
if [[ ! -s $cache/base-initrd.cpio.gz ]]; then
  log "building $cache/base-initrd.cpio.gz"
  tree=$(mktemp -d "$cache/initrd.XXXXXX")
  mkdir -p "$tree"/{bin,dev,proc,sys,mnt,newroot,lib/modules}
  cp /bin/busybox "$tree/bin/busybox"
  for applet in $("$tree/bin/busybox" --list); do
    [[ -e $tree/bin/$applet ]] || ln -s busybox "$tree/bin/$applet"
  done
  # modprobe --show-depends lists each module after its dependencies: that is
  # the order the init loads them in.
  for module in "${initrd_modules[@]}"; do
    modprobe -d "$cache/kroot" -S "$kernel_version" --show-depends "$module" | awk '$1 == "insmod" {print $2}'
  done | awk '!seen[$0]++' | while read -r file; do
    name=$(basename "$file")
    case $file in
      *.ko) cp "$file" "$tree/lib/modules/$name" ;;
      *.ko.xz) name=${name%.xz}; xz -dc "$file" > "$tree/lib/modules/$name" ;;
      *.ko.zst) name=${name%.zst}; zstd -qdc "$file" > "$tree/lib/modules/$name" ;;
      *) die "unexpected module file $file" ;;
    esac
    echo "$name" >> "$tree/lib/modules/load-order"
  done
  (cd "$tree" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 > "$cache/base-initrd.cpio.gz.tmp"
  mv "$cache/base-initrd.cpio.gz.tmp" "$cache/base-initrd.cpio.gz"
  rm -rf "$tree"
fi

log "ready: kernel $kernel_version in $cache"
log "try: $(dirname "$0")/run.sh -- ibv_devinfo -d rxe0"
