#!/usr/bin/env bash
# architecture_true.sh SOURCE_DIR: docs/architecture.md is true to the tree,
# and the CHORUS_* variables of the code are documented (issue 43). Fails,
# naming each discrepancy, when
#  a. a transport folder (transports/<x>/ with a CMakeLists.txt) is not named
#     in docs/architecture.md, or the page names a transports/<x>/ folder that
#     does not exist;
#  b. a component folder (src/base/<x>/, src/p2p/, src/front/<x>/,
#     collectives/, transports/, launcher/, bench/, bindings/ and
#     bindings/<x>/) is not named in docs/architecture.md, or the page names a
#     path under src/, transports/, collectives/, launcher/, bench/, bindings/
#     or include/ that does not exist ({a,b} alternatives, * and <placeholder>
#     are expanded as globs);
#  c. an environment variable the code reads is documented nowhere in
#     README.md or docs/*.md; a variable of README.md's table ("Environment
#     variables") is not in the code; or a variable of the code's settings
#     tables (config::VariableDoc rows, test hooks CHORUS_TEST_* aside) is
#     missing from README.md's table, which config.hpp says derives from them.
#
# Which CHORUS_* names are environment variables: the C, C++ and Python
# sources of the directories above are searched for string literals that are
# exactly a name ("CHORUS_TIMEOUT", "CHORUS_ALGO_<OP>"), comments left out.
# That is every name given to getenv, config::get and the config::env_*
# parsers, and every row of the settings tables chorus_info prints. It leaves
# out what is no variable: preprocessor and CMake names (CHORUS_HAVE_OFI,
# CHORUS_VERSION_*, header guards) are never string literals, and names that
# only appear inside longer text (messages, the "CHORUS_TIMOUT=5" example) are
# not a whole literal. Of the whole literals, the status-code names
# (CHORUS_SUCCESS, CHORUS_ERR_*: to_string(Status), the C API's codes) are
# not variables. A literal ending in "_" is a family prefix (CHORUS_TEST_,
# CHORUS_LAB_, CHORUS_ALGO_) and must be documented as PREFIX* or
# PREFIX<...>; a name covered by a documented pattern (CHORUS_ALGO_ALLREDUCE
# by CHORUS_ALGO_<OP>) counts as documented. Variables that only shell
# scripts or CMake-generated wrappers read (chorus-mpicc's CHORUS_MPICC_CC)
# are not seen.
#
# Prints each discrepancy and exits 1; prints OK with the counts and exits 0.
set -euo pipefail
# shellcheck source=source_dir.sh source-path=SCRIPTDIR
source "$(dirname "$0")/source_dir.sh"
enter_source_dir "$@" <<'USAGE'
Usage: tests/docs/architecture_true.sh SOURCE_DIR
Fails, naming each, when docs/architecture.md and the tree disagree on the transport
folders, the component folders or the src/... paths it names, or when a CHORUS_*
variable the code reads is undocumented (README.md, docs/*.md) or README.md's
variable table names one the code does not read.
USAGE
shopt -s nullglob

arch=docs/architecture.md
docs=(README.md docs/*.md)
for file in "$arch" README.md; do
  [[ -f $file ]] || { echo "architecture_true: FAILED: $file does not exist"; exit 1; }
done

problems=0
problem() {
  echo "architecture_true: $*"
  problems=$((problems + 1))
}

# regex TEXT: TEXT with the characters ERE gives a meaning escaped.
# shellcheck disable=SC2016  # the $ is a character to escape, not an expansion
regex() { printf '%s' "$1" | sed 's/[][\.*^$()+?{}|]/\\&/g'; }

# named PATH: docs/architecture.md names the folder PATH ("PATH/" or PATH
# followed by something that cannot continue a path).
named() {
  grep -qE "(^|[^A-Za-z0-9_./-])$(regex "$1")(/|[^A-Za-z0-9_.-]|$)" "$arch"
}

# --- a. transport folders ----------------------------------------------------
transports=0
for dir in transports/*/; do
  dir=${dir%/}
  [[ -f $dir/CMakeLists.txt ]] || continue
  transports=$((transports + 1))
  named "$dir" || problem "transport folder $dir/ (it has a CMakeLists.txt) is not named in $arch"
done
missing_transports=" "
while IFS=: read -r line folder; do
  folder=${folder#"${folder%%transports/*}"}
  if [[ ! -d ${folder%/} ]]; then
    problem "$arch:$line names transport folder $folder, which does not exist"
    missing_transports+="$folder "
  fi
done < <(grep -noE '(^|[^A-Za-z0-9_./-])transports/[A-Za-z0-9_-]+/' "$arch" | sort -t: -k2 -u)

# --- b. component folders and the paths the page names ------------------------
components=0
for dir in src/base/*/ src/p2p/ src/front/*/ collectives/ transports/ launcher/ bench/ bindings/ bindings/*/; do
  dir=${dir%/}
  [[ -d $dir ]] || continue
  [[ $dir == bindings/* && ! -f $dir/CMakeLists.txt ]] && continue
  components=$((components + 1))
  named "$dir" || problem "component folder $dir/ is not named in $arch"
done
for dir in src/p2p collectives transports launcher bench bindings; do
  [[ -d $dir ]] || problem "$dir/ does not exist (a component folder this check expects)"
done

# expand WORD: WORD with each {a,b} alternative expanded, one a line.
expand() {
  if [[ $1 =~ ^([^{]*)\{([^}]*)\}(.*)$ ]]; then
    local head=${BASH_REMATCH[1]} tail=${BASH_REMATCH[3]} choice
    local -a choices
    IFS=, read -ra choices <<< "${BASH_REMATCH[2]}"
    for choice in "${choices[@]}"; do expand "$head$choice$tail"; done
  else
    printf '%s\n' "$1"
  fi
}
paths=0
path_chars='([A-Za-z0-9_./*<>+-]|\{[A-Za-z0-9_.,-]*\})*'
while IFS=: read -r line token; do
  token=$(printf '%s' "$token" | sed -E 's/^[^a-z]*//; s/\.+$//')
  [[ -n $token ]] || continue
  # A missing transport folder is reported once, above.
  [[ $token == transports/* && $missing_transports == *" $(cut -d/ -f1-2 <<< "$token")/ "* ]] && continue
  paths=$((paths + 1))
  while read -r alternative; do
    pattern=$(printf '%s' "$alternative" | sed 's/<[^>]*>/*/g')
    if ! compgen -G "$pattern" > /dev/null; then
      problem "$arch:$line names $alternative, which does not exist"
    fi
  done < <(expand "$token")
done < <(grep -noE "(^|[^A-Za-z0-9_./-])(src|transports|collectives|launcher|bench|bindings|include)/$path_chars" "$arch" \
           | sort -t: -k1,1n -k2 -u)

# --- c. CHORUS_* environment variables ---------------------------------------
# The whole string literals of the sources, comments left out.
code_literals() {
  local file
  while IFS= read -r -d '' file; do
    case $file in
      *.py) sed -E 's/(^|[[:space:]])#.*$//' "$file" | grep -ohE "[\"']CHORUS_[A-Z0-9_]*(<[A-Z]+>)?[\"']" || true ;;
      *) sed -E 's@(^|[[:space:]])//.*$@@' "$file" | grep -ohE '"CHORUS_[A-Z0-9_]*(<[A-Z]+>)?"' || true ;;
    esac
  done < <(find src transports collectives launcher bench bindings -type f \
             \( -name '*.cc' -o -name '*.cpp' -o -name '*.c' -o -name '*.hpp' -o -name '*.h' -o -name '*.py' \) \
             -print0 2> /dev/null)
}
mapfile -t literals < <(code_literals | tr -d "\"'" | sort -u)

# documented NAME: NAME appears as a whole name in README.md or docs/*.md.
documented() {
  grep -qE "(^|[^A-Za-z0-9_])$(regex "$1")([^A-Za-z0-9_]|$)" "${docs[@]}"
}
# The patterns the docs give (CHORUS_ALGO_<OP>): their prefixes, one a line.
mapfile -t doc_pattern_prefixes < <(grep -ohE 'CHORUS_[A-Z0-9_]*<[A-Za-z_]+>' "${docs[@]}" | sed 's/<.*//' | sort -u)
covered_by_pattern() {
  local prefix
  for prefix in "${doc_pattern_prefixes[@]}"; do [[ $1 == "$prefix"* ]] && return 0; done
  return 1
}

variables=0
declare -A in_code=()
for name in "${literals[@]}"; do
  case $name in
    CHORUS_) continue ;;                          # the namespace itself
    CHORUS_SUCCESS | CHORUS_ERR_*) continue ;;    # status codes, not variables
    *_)                                           # a family: CHORUS_TEST_, CHORUS_LAB_, CHORUS_ALGO_
      in_code[$name]=1
      grep -qF -e "$name*" -e "$name<" "${docs[@]}" ||
        problem "the code reads the family $name* (a name prefix), which README.md and docs/*.md never name as $name* or $name<...>"
      continue ;;
  esac
  in_code[$name]=1
  variables=$((variables + 1))
  if [[ $name == *'<'* ]]; then
    grep -qF -- "$name" "${docs[@]}" || problem "the code reads $name, documented nowhere in README.md or docs/*.md"
  elif ! documented "$name" && ! covered_by_pattern "$name"; then
    problem "the code reads $name, documented nowhere in README.md or docs/*.md"
  fi
done

# README.md's table: the first cell of each row of "## Environment variables".
mapfile -t table < <(awk '/^## / {inside = ($0 == "## Environment variables")} inside && /^\| *`CHORUS_/' README.md \
                       | cut -d'|' -f2 | grep -oE 'CHORUS_[A-Z0-9_]+(<[A-Z]+>)?' | sort -u)
((${#table[@]})) || problem "README.md has no \"## Environment variables\" table of CHORUS_* names"
declare -A in_table=()
for name in "${table[@]}"; do
  in_table[$name]=1
  [[ -n ${in_code[$name]:-} ]] ||
    problem "README.md's variable table names $name, which the code does not read (no \"$name\" literal in the sources)"
done
# The settings tables' rows: {"CHORUS_NAME", "default", "meaning"}.
declared=0
while read -r name; do
  declared=$((declared + 1))
  [[ $name == CHORUS_TEST_* ]] && continue
  [[ -n ${in_table[$name]:-} ]] ||
    problem "$name is in the code's settings tables (chorus_info prints it) but not in README.md's variable table"
done < <(find src transports -type f \( -name '*.cc' -o -name '*.hpp' \) -print0 \
           | xargs -0 cat | grep -oE '\{"CHORUS_[A-Z0-9_]*(<[A-Z]+>)?", *"' | grep -oE 'CHORUS_[A-Z0-9_]*(<[A-Z]+>)?' | sort -u)

if ((problems)); then
  echo "architecture_true: FAILED: $problems discrepanc$( ((problems == 1)) && echo y || echo ies) between the docs and the tree"
  exit 1
fi
echo "architecture_true: OK: $transports transport folders, $components component folders and $paths path mentions" \
     "of $arch agree with the tree; $variables CHORUS_* variables read by the code are documented," \
     "${#table[@]} names of README.md's table are read by the code, $declared settings-table rows are in it"
