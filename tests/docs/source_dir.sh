# shellcheck shell=bash
# Sourced by the docs checks, which take one argument, SOURCE_DIR.
# enter_source_dir "$@" <<EOF ... EOF: with exactly one argument, and not
# -h or --help, makes it the current directory, with LC_ALL=C; otherwise
# prints the usage (the here-document) and exits, 0 for -h/--help alone and
# 2 for a wrong number of arguments.
enter_source_dir() {
  if [[ ${1:-} == -h || ${1:-} == --help || $# != 1 ]]; then
    cat
    [[ $# == 1 ]] && exit 0 || exit 2
  fi
  cd "$1" || exit 1
  export LC_ALL=C
}
