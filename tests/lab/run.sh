#!/usr/bin/env bash
# run.sh: runs one command inside soft-RoCE guest(s) of the lab (docs/lab.md)
# and powers them off; exits with the command's status.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: tests/lab/run.sh [options] -- COMMAND [ARGS...]
       tests/lab/run.sh [options] -c 'SHELL COMMAND'
       tests/lab/run.sh --check [-n N]

Boots Debian's kernel (prepared by tests/lab/setup.sh) under qemu with
soft-RoCE: the guest sees this host's whole root filesystem read-only under
a tmpfs overlay (its writes are discarded), creates the RDMA device rxe0,
runs COMMAND as root in the current directory with the current exported
environment, streams its stdout and stderr here, and powers off.

  -n N         N guests joined by a virtual switch (vde_switch, no host
               network interface involved), one rxe0 each; all run COMMAND,
               after waiting for each other; output lines get "[rN] ".
               Default 1.
  -w DIR       make host directory DIR writable in the guest(s): writes land
               on the host (repeatable)
  -W           the same for the current directory
  -m SIZE      memory per guest (default 4G for one guest, 2G each for more)
  -s CPUS      virtual CPUs per guest (default: host CPUs / N, at least 1)
  -t SECONDS   stop the guests after this long (default 1800): status 124
  -i SECONDS   also stop them once none has printed a line for this long
               (a stalled run; status 124): a budget that follows progress
               on a loaded host, where -t alone must guess (default 0: off)
  --mtu BYTES  MTU of the Ethernet device under rxe0 (default 1500: RDMA
               MTU 1024; 4200 gives RDMA MTU 4096)
  --no-rxe     no RDMA modules, no rxe0
  -v           also print the guests' consoles (kernel, setup steps)
  -k           keep the run directory (consoles, qemu logs) and name it
  --check      only say whether the lab can run here (exit 0) or why not
               (exit 1)
  -h, --help   this text

In the guest, COMMAND sees CHORUS_LAB_RANK, CHORUS_LAB_RANKS,
CHORUS_LAB_IP (its rxe0 address), CHORUS_LAB_IPS (all guests' addresses,
space separated; rank r has 10.78.0.r+1), CHORUS_LAB_DEV=rxe0 and
CHORUS_LAB_GID_INDEX (the RoCE v2 GID of that address).

Exit status: COMMAND's (with N guests, the first non-zero one); 124 on
timeout; 125 when the lab itself failed (not prepared, a guest that left no
status: its console is printed).
Environment: CHORUS_LAB_CACHE (as for setup.sh), CHORUS_LAB_ACCEL (default
tcg; kvm where /dev/kvm can boot a stock kernel), CHORUS_LAB_CPU (qemu's
-cpu model; default qemu64 under tcg, max under kvm).
USAGE
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${CHORUS_LAB_CACHE:-/var/cache/chorus-lab}
accel=${CHORUS_LAB_ACCEL:-tcg}
# Under TCG the baseline x86-64 model runs the lab about 10 % faster than
# "max" (glibc and the kernel then take SSE2 paths, which TCG translates
# more cheaply than the AVX2/AVX-512 ones: docs/lab.md).
if [[ $accel == tcg ]]; then cpu_model=${CHORUS_LAB_CPU:-qemu64}; else cpu_model=${CHORUS_LAB_CPU:-max}; fi
guests=1 memory='' cpus='' timeout_seconds=1800 idle_seconds=0 mtu=1500 rxe=1 verbose=0 keep=0 check_only=0
shell_command='' have_shell_command=0
writable=()
while (($#)); do
  case $1 in
    -n) guests=${2:?-n needs a number}; shift 2 ;;
    -w) writable+=("$(realpath -m -- "${2:?-w needs a directory}")"); shift 2 ;;
    -W) writable+=("$PWD"); shift ;;
    -m) memory=${2:?-m needs a size}; shift 2 ;;
    -s) cpus=${2:?-s needs a number}; shift 2 ;;
    -t) timeout_seconds=${2:?-t needs seconds}; shift 2 ;;
    -i) idle_seconds=${2:?-i needs seconds}; shift 2 ;;
    --mtu) mtu=${2:?--mtu needs a size}; shift 2 ;;
    --no-rxe) rxe=0; shift ;;
    -v) verbose=1; shift ;;
    -k) keep=1; shift ;;
    -c) shell_command=${2?-c needs a command}; have_shell_command=1; shift 2 ;;
    --check) check_only=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) echo "run.sh: unknown option \"$1\" (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
bad_usage() { echo "run.sh: $*" >&2; exit 2; }
[[ $guests =~ ^[1-9][0-9]*$ ]] && ((guests <= 250)) || bad_usage "-n wants 1 to 250 guests, not \"$guests\""
[[ $timeout_seconds =~ ^[1-9][0-9]*$ ]] || bad_usage "-t wants whole seconds, not \"$timeout_seconds\""
[[ $idle_seconds =~ ^[0-9]+$ ]] || bad_usage "-i wants whole seconds, not \"$idle_seconds\""
[[ $mtu =~ ^[0-9]+$ ]] && ((mtu >= 1280 && mtu <= 9000)) || bad_usage "--mtu wants 1280 to 9000, not \"$mtu\""
[[ -z $cpus || $cpus =~ ^[1-9][0-9]*$ ]] || bad_usage "-s wants a number of CPUs, not \"$cpus\""
[[ -n $memory ]] || { ((guests == 1)) && memory=4G || memory=2G; }
[[ -n $cpus ]] || { cpus=$(($(nproc) / guests)); ((cpus >= 1)) || cpus=1; }

# ------------------------------------------------------------ can it run?
# Every reason the lab cannot run here, in one message (ctest prints it as
# the reason a lab test was skipped).
lab_problems() {
  local problems=()
  command -v qemu-system-x86_64 >/dev/null || problems+=("qemu-system-x86_64 is not installed")
  command -v cpio >/dev/null || problems+=("cpio is not installed")
  ((guests == 1)) || command -v vde_switch >/dev/null || problems+=("vde_switch (package vde2) is not installed")
  if [[ ! -s $cache/kernel.env || ! -s $cache/base-initrd.cpio.gz ]]; then
    problems+=("$cache is not prepared")
  fi
  ((${#problems[@]})) || return 0
  local problem
  for problem in "${problems[@]}"; do printf '%s; ' "$problem"; done
  echo "run $here/setup.sh (as root; .ci/install-deps does)"
  return 1
}
if ((check_only)); then
  if reason=$(lab_problems); then echo "run.sh: the lab is ready ($cache)"; exit 0; fi
  echo "run.sh: the lab cannot run here: $reason"
  exit 1
fi
((have_shell_command || $# > 0)) || bad_usage "no command (see --help)"
if ! reason=$(lab_problems); then echo "run.sh: the lab cannot run here: $reason" >&2; exit 125; fi

kernel_version=
# shellcheck source=/dev/null
. "$cache/kernel.env"   # sets kernel_version
[[ -n $kernel_version ]] || { echo "run.sh: $cache/kernel.env names no kernel; rerun $here/setup.sh" >&2; exit 125; }
kernel=$cache/vmlinux-$kernel_version
[[ -s $kernel ]] || kernel=$cache/kroot/boot/vmlinuz-$kernel_version

run_dir=$(mktemp -d "${TMPDIR:-/tmp}/chorus-lab.XXXXXX")
background=()
cleanup() {
  local pid
  for pid in "${background[@]}"; do kill "$pid" 2>/dev/null || true; done
  if ((keep)); then echo "run.sh: run directory kept: $run_dir" >&2; else rm -rf "$run_dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ----------------------------------------------------- what every guest gets
if ((have_shell_command)); then
  printf '%s\n' "$shell_command" > "$run_dir/command"
else
  { printf 'exec'; printf ' %q' "$@"; printf '\n'; } > "$run_dir/command"
fi
# The exported environment, minus what describes this host session rather
# than the program (terminal, ssh, desktop, shell bookkeeping).
export -p | grep -Ev '^declare -[a-zA-Z-]+ (PWD|OLDPWD|SHLVL|_|HOSTNAME|TERM|TMUX[A-Z_]*|SSH_[A-Z_]*|DISPLAY|XDG_[A-Z_]*|DBUS_[A-Z_]*|MAIL|PS1|BASH_FUNC_[^=]*)=' \
  > "$run_dir/environment" || true
# The initramfs: the cached base plus this tree's init (see setup.sh).
init_dir=$(mktemp -d "$run_dir/init.XXXXXX")
install -m 0755 "$here/guest/init" "$init_dir/init"
{ cat "$cache/base-initrd.cpio.gz"; (cd "$init_dir" && echo init | cpio -o -H newc --quiet | gzip -1); } > "$run_dir/initrd"
rm -rf "$init_dir"

share_args=()
: > "$run_dir/mounts"
for ((i = 0; i < ${#writable[@]}; i++)); do
  dir=${writable[i]}
  [[ -d $dir ]] || bad_usage "-w $dir: not a directory"
  [[ $dir != / ]] || bad_usage "-w /: the root stays read-only (name the directories to write)"
  [[ $dir != *[[:space:]]* ]] || bad_usage "-w \"$dir\": the lab cannot share paths with spaces"
  share_args+=(-fsdev "local,id=writable$i,path=$dir,security_model=none,multidevs=remap"
               -device "virtio-9p-pci,fsdev=writable$i,mount_tag=labrw$i")
  printf 'labrw%d\t%s\n' "$i" "$dir" >> "$run_dir/mounts"
done

addresses=
for ((r = 0; r < guests; r++)); do addresses+="${addresses:+ }10.78.$(((r + 1) / 256)).$(((r + 1) % 256))"; done
if ((guests > 1)); then
  # A switch on a unix socket in the run directory: the guests reach each
  # other and nothing else. It drops a few percent of packets under load
  # (docs/lab.md), which RC retransmits.
  vde_switch --sock "$run_dir/switch" --daemon --pidfile "$run_dir/switch.pid" < /dev/null > /dev/null 2>&1 \
    || { echo "run.sh: vde_switch did not start" >&2; exit 125; }
  for _ in {1..100}; do [[ -s $run_dir/switch.pid ]] && break; sleep 0.05; done
  [[ -s $run_dir/switch.pid ]] || { echo "run.sh: vde_switch wrote no pid file" >&2; exit 125; }
  background+=("$(< "$run_dir/switch.pid")")
fi

# mitigations=off: page-table isolation on an emulated CPU makes every guest
# system call several times slower. nokaslr, tsc=reliable, no_timer_check:
# skip work and checks that only cost time under emulation.
kernel_args="console=ttyS0 quiet loglevel=4 panic=-1 mitigations=off nokaslr tsc=reliable no_timer_check"
kernel_args+=" random.trust_cpu=on 8250.nr_uarts=1 lab_kernel_version=$kernel_version lab_cache=$cache"

# ---------------------------------------------------------------- the guests
qemu_pids=() readers=()
# The guest ends each output port with this line and powers off only once it
# has seen the line in the file on the host (guest/main.sh): the guest's
# virtio-serial queue holds what qemu has not yet written, and a power-off
# drops it. The readers below remove the line.
end_marker="chorus-lab-end-of-output-$$-$RANDOM$RANDOM"

start_guest() {
  local rank=$1 dir=$run_dir/guest$1
  mkdir -p "$dir"
  cp "$here/guest/main.sh" "$run_dir/command" "$run_dir/environment" "$run_dir/mounts" "$dir/"
  {
    printf 'lab_rank=%q lab_ranks=%q lab_addresses=%q\n' "$rank" "$guests" "$addresses"
    printf 'lab_rxe=%q lab_mtu=%q lab_directory=%q lab_path=%q\n' "$rxe" "$mtu" "$PWD" "$PATH"
    printf 'lab_end_marker=%q\n' "$end_marker"
  } > "$dir/params"
  local args=(
    -machine q35 -cpu "$cpu_model" -smp "$cpus" -m "$memory"
    -nodefaults -no-user-config -display none -vga none -no-reboot
    -kernel "$kernel" -initrd "$run_dir/initrd" -append "$kernel_args"
    # multidevs=remap: inode numbers stay unique across the host's mounts
    -fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap"
    -device "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot"
    -fsdev "local,id=labrun,path=$dir,security_model=none"
    -device "virtio-9p-pci,fsdev=labrun,mount_tag=labrun"
    -device virtio-serial-pci
    -chardev "file,id=stdout,path=$dir/stdout"
    -device "virtserialport,chardev=stdout,name=lab.stdout"
    -chardev "file,id=stderr,path=$dir/stderr"
    -device "virtserialport,chardev=stderr,name=lab.stderr"
    -serial "file:$dir/console"
    "${share_args[@]}"
  )
  if [[ $accel == tcg ]]; then
    # One host thread per virtual CPU; a larger translation cache keeps
    # ctest's many short processes from retranslating.
    args+=(-accel "tcg,thread=multi,tb-size=512")
  else
    args+=(-accel "$accel")
  fi
  if ((guests > 1)); then
    args+=(-fsdev "local,id=labshared,path=$run_dir,security_model=none"
           -device "virtio-9p-pci,fsdev=labshared,mount_tag=labshared"
           -netdev "vde,id=net,sock=$run_dir/switch"
           -device "virtio-net-pci,netdev=net,mac=52:54:00:1a:$(printf '%02x:%02x' $((rank / 256)) $((rank % 256)))")
  else
    args+=(-nic none)
  fi
  # qemu writes the command's output into plain files (never a FIFO: a
  # reader that falls behind on a loaded host throttles qemu, the guest's
  # queue fills, and what it holds at the power-off is lost); readers copy
  # them here as they grow, with the rank in front when there are several
  # guests, and end once qemu has ended and they have read to the end.
  : > "$dir/stdout"
  : > "$dir/stderr"
  timeout "$timeout_seconds" qemu-system-x86_64 "${args[@]}" < /dev/null > "$dir/qemu.log" 2>&1 &
  local qemu=$!
  qemu_pids+=("$qemu")
  background+=("$qemu")
  local prefix=
  ((guests == 1)) || prefix="[r$rank] "
  local copy=(sed -u -e "/^$end_marker\$/d" -e "s/$end_marker\$//" -e "s/^/$prefix/")
  tail -n +1 -f --pid="$qemu" "$dir/stdout" | "${copy[@]}" &
  readers+=($!)
  tail -n +1 -f --pid="$qemu" "$dir/stderr" | "${copy[@]}" >&2 &
  readers+=($!)
  background+=("${readers[@]: -2}")
  if ((verbose)); then
    : > "$dir/console"
    tail -n +1 -f --pid="$qemu" "$dir/console" | sed -u "s/^/[console $rank] /" >&2 &
    background+=($!)
  fi
}
for ((r = 0; r < guests; r++)); do start_guest "$r"; done
# -i: the watchdog stops the guests once no guest has written to its output
# files for idle_seconds.
if ((idle_seconds > 0)); then
  (
    while sleep 10; do
      last=$(stat -c %Y "$run_dir"/guest*/std{out,err} 2>/dev/null | sort -n | tail -n 1)
      [[ -n $last ]] || exit 0
      if (($(date +%s) - last >= idle_seconds)); then
        : > "$run_dir/idle"
        kill "${qemu_pids[@]}" 2>/dev/null
        exit 0
      fi
    done
  ) &
  background+=($!)
fi

timed_out=0
for pid in "${qemu_pids[@]}"; do
  if wait "$pid"; then continue; else qemu_status=$?; fi
  if ((qemu_status == 124)); then timed_out=1; fi
done
# The readers end once their qemu has ended and they have copied the rest
# (tail --pid reads once more after the process is gone); on a loaded host
# that can take a while, nothing is lost by waiting.
for pid in "${readers[@]}"; do
  for _ in {1..3000}; do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
done

if [[ -e $run_dir/idle ]]; then
  echo "run.sh: stopped the guests: none printed a line for ${idle_seconds}s; their consoles end with:" >&2
  for ((r = 0; r < guests; r++)); do tail -n 20 "$run_dir/guest$r/console" | sed "s/^/[console $r] /" >&2; done
  exit 124
fi
if ((timed_out)); then
  echo "run.sh: stopped the guests after ${timeout_seconds}s; their consoles end with:" >&2
  for ((r = 0; r < guests; r++)); do tail -n 20 "$run_dir/guest$r/console" | sed "s/^/[console $r] /" >&2; done
  exit 124
fi
status=0
for ((r = 0; r < guests; r++)); do
  dir=$run_dir/guest$r
  if [[ ! -s $dir/status ]]; then
    echo "run.sh: guest $r ended without an exit status; its qemu log and console:" >&2
    cat "$dir/qemu.log" "$dir/init-error" 2>/dev/null >&2 || true
    tail -n 40 "$dir/console" >&2 || true
    exit 125
  fi
  guest_status=$(< "$dir/status")
  ((status != 0)) || status=$guest_status
done
exit "$status"
