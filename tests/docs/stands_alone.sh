#!/usr/bin/env bash
# stands_alone.sh SOURCE_DIR: no file of the source tree refers to the
# sibling directory the project started from (its name is spelled in two
# pieces here so that this file does not name it): a clone with nothing
# beside it must carry everything it names. Build directories and .git are
# not looked at.
set -euo pipefail
sibling="../""shared"
if [[ ${1:-} == -h || ${1:-} == --help || $# != 1 ]]; then
  echo "Usage: tests/docs/stands_alone.sh SOURCE_DIR"
  echo "Fails, listing them, if files of the source tree name $sibling."
  [[ $# == 1 ]] && exit 0 || exit 2
fi
cd "$1"
if grep -rInF --exclude-dir=.git --exclude-dir='build*' -e "$sibling" . ; then
  echo "stands_alone: FAILED: the files above name $sibling, which a clone does not have"
  exit 1
fi
echo "stands_alone: OK: nothing names $sibling"
