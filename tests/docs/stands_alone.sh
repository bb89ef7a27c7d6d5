#!/usr/bin/env bash
# stands_alone.sh SOURCE_DIR: no file of the source tree refers to the
# sibling directory the project started from (its name is spelled in two
# pieces here so that this file does not name it): a clone with nothing
# beside it must carry everything it names. Build directories and .git are
# not looked at.
set -euo pipefail
sibling="../""shared"
# shellcheck source=source_dir.sh source-path=SCRIPTDIR
source "$(dirname "$0")/source_dir.sh"
enter_source_dir "$@" <<USAGE
Usage: tests/docs/stands_alone.sh SOURCE_DIR
Fails, listing them, if files of the source tree name $sibling.
USAGE
if grep -rInF --exclude-dir=.git --exclude-dir='build*' -e "$sibling" . ; then
  echo "stands_alone: FAILED: the files above name $sibling, which a clone does not have"
  exit 1
fi
echo "stands_alone: OK: nothing names $sibling"
