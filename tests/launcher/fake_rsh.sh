#!/usr/bin/env bash
# Stands in for ssh in tests: `fake_rsh.sh HOST command...` records the host
# it was asked for and runs the command here (the launcher cannot tell).
host=$1
shift
echo "fake_rsh: host=$host" >&2
exec "$@"
