#!/usr/bin/env bash
# links_resolve.sh SOURCE_DIR: every relative link in README.md and docs/*.md
# names a file or directory of the source tree, and a "#section" after a
# Markdown file names one of its headings (GitHub's anchors: lower case,
# punctuation dropped, spaces as hyphens). Links inside code blocks and to
# web addresses are not checked. Prints each broken link with its file and
# line; exits 1 if there is one.
set -euo pipefail
# shellcheck source=source_dir.sh source-path=SCRIPTDIR
source "$(dirname "$0")/source_dir.sh"
enter_source_dir "$@" <<'USAGE'
Usage: tests/docs/links_resolve.sh SOURCE_DIR
Checks the relative links (and #anchors) of README.md and docs/*.md.
USAGE

# anchors FILE: the anchor of each heading of a Markdown file, one a line.
anchors() {
  awk '/^```/ {fenced = !fenced; next} !fenced && /^#+ / {sub(/^#+ +/, ""); print}' "$1" \
    | tr '[:upper:]' '[:lower:]' | sed 's/[^a-z0-9 _-]//g; s/ /-/g'
}

broken=0 checked=0
for file in README.md docs/*.md; do
  # "LINE<TAB>TARGET" for each [text](target) outside code blocks.
  while IFS=$'\t' read -r line target; do
    case $target in http://*|https://*|mailto:*) continue ;; esac
    checked=$((checked + 1))
    path=${target%%#*} anchor=
    [[ $target == *#* ]] && anchor=${target#*#}
    if [[ -z $path ]]; then resolved=$file
    else resolved=$(dirname "$file")/$path; fi
    if [[ ! -e $resolved ]]; then
      echo "$file:$line: broken link \"$target\": $resolved does not exist"
      broken=$((broken + 1))
    elif [[ -n $anchor && $resolved == *.md ]] && ! anchors "$resolved" | grep -qxF -- "$anchor"; then
      echo "$file:$line: broken link \"$target\": $resolved has no heading with anchor #$anchor"
      broken=$((broken + 1))
    fi
  done < <(awk '/^```/ {fenced = !fenced; next}
                !fenced {
                  text = $0
                  while (match(text, /\]\([^)]+\)/)) {
                    target = substr(text, RSTART + 2, RLENGTH - 3)
                    sub(/ +"[^"]*"$/, "", target)   # [text](target "title")
                    print FNR "\t" target
                    text = substr(text, RSTART + RLENGTH)
                  }
                }' "$file")
done
if ((broken)); then echo "links_resolve: $broken of $checked links broken"; exit 1; fi
echo "links_resolve: OK: all $checked relative links resolve"
