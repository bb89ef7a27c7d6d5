# Sourced by the scripts that end jobs on purpose (tests/faults,
# tests/failfast): what a job's ranks left in /dev/shm.
#
# chorus' shm transport (transports/shm/shm_segment.cc) and libfabric's shm
# provider (src/base/common/shm_regions.hpp) name their files "<pid>:..."
# after the process that made them; chorusrun removes a dead rank's
# (shm_regions::remove_stale). So a job is clean when no file in /dev/shm
# starts with the pid of one of its ranks.
#
#   shm_pids_file=$(mktemp)                        # one pid a line
#   record_pids=(sh -c 'echo $$ >>"$0"; exec "$@"' "$shm_pids_file")
#   chorusrun ... "${record_pids[@]}" PROGRAM ARGS  # each rank writes its pid, then execs
#   left=$(shm_left_by "$shm_pids_file")           # names left behind, or empty
#
# The exec keeps the pid, so the file lists the ranks' own pids (the ones
# chorusrun names); the program's arguments stay on its command line.

# Prints, space-separated, the /dev/shm files whose names start with a pid
# listed in FILE; nothing if there are none.
shm_left_by() {
  local pid name left=""
  while read -r pid; do
    [ -n "$pid" ] || continue
    for name in /dev/shm/"$pid":*; do
      [ -e "$name" ] && left+="${name#/dev/shm/} "
    done
  done <"$1"
  echo "${left% }"
}

# Fails (status 1) after saying "FAIL: left in /dev/shm: ..." and removing
# them, if the ranks whose pids FILE lists left files there.
fail_on_shm_leftovers() {
  local name left
  left=$(shm_left_by "$1")
  [ -n "$left" ] || return 0
  echo "FAIL: left in /dev/shm: $left"
  for name in $left; do rm -f "/dev/shm/$name"; done
  return 1
}
