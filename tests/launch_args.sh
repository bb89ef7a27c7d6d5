# Sourced by the test scripts that launch one job: after the script's own
# positional arguments are shifted away, splits "[chorusrun args] -- [program
# args]" into the array launcher_args and the remaining "$@" (program_args),
# and makes a log file removed on exit.
launcher_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do launcher_args+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
program_args=("$@")
log=$(mktemp)
trap 'rm -f "$log"' EXIT
