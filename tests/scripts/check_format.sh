#!/bin/sh
# check_format.sh [SOURCE_DIR]: the house style (issue #13 item 8). Every
# tracked C/CUDA file (*.c, *.h, *.cu) must be as clang-format leaves it under
# .clang-format, and no line of them may be over 120 columns. Names the files
# that are off and the one command that fixes them. Exits 77 (CTest's skip)
# when clang-format is not installed; CI installs it (.ci/setup).
# CLANG_FORMAT=/path/to/clang-format picks the binary; CI uses version 14.
set -u
cd "${1:-$(dirname "$0")/../..}" || exit 1
limit=120

cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
  for c in clang-format-14 clang-format; do
    if command -v "$c" >/dev/null 2>&1; then cf=$c; break; fi
  done
fi
if [ -z "$cf" ] || ! command -v "$cf" >/dev/null 2>&1; then
  echo "SKIP: clang-format is not installed (apt-get install clang-format)"
  exit 77
fi
[ -f .clang-format ] || { echo "FAIL: no .clang-format in $(pwd)"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the files: git's list, or without git (a source tarball) every C/CUDA file
# outside the build folders
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files '*.c' '*.h' '*.cu' >"$tmp/files"
else
  find . \( -name '.git' -o -name 'build*' -o -name 'out' \) -prune -o -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) -print | sed 's|^\./||' | sort >"$tmp/files"
fi
[ -s "$tmp/files" ] || { echo "FAIL: no C/CUDA files found in $(pwd)"; exit 1; }

: >"$tmp/off"
while IFS= read -r f; do
  [ -f "$f" ] || continue # deleted but not yet committed
  "$cf" --style=file --dry-run --Werror "$f" >/dev/null 2>&1 || echo "$f" >>"$tmp/off"
done <"$tmp/files"

# columns, not bytes: UTF-8 continuation bytes do not count
: >"$tmp/long"
while IFS= read -r f; do
  [ -f "$f" ] || continue
  LC_ALL=C awk -v limit="$limit" '{ s = $0; gsub(/[\200-\277]/, "", s)
    if (length(s) > limit) printf "%s:%d: %d columns\n", FILENAME, FNR, length(s) }' "$f" >>"$tmp/long"
done <"$tmp/files"

n=$(wc -l <"$tmp/files" | tr -d ' ')
if [ ! -s "$tmp/off" ] && [ ! -s "$tmp/long" ]; then
  echo "ok: $n files formatted ($("$cf" --version | sed 's/.*version //')), no line over $limit columns"
  exit 0
fi
if [ -s "$tmp/off" ]; then
  echo "FAIL: $(wc -l <"$tmp/off" | tr -d ' ') of $n files are not as clang-format leaves them:"
  sed 's/^/  /' "$tmp/off"
  "$cf" --style=file --dry-run "$(head -n 1 "$tmp/off")" 2>&1 | head -n 20 | sed 's/^/  | /'
fi
if [ -s "$tmp/long" ]; then
  echo "FAIL: lines over $limit columns (clang-format cannot break these; shorten them by hand):"
  sed 's/^/  /' "$tmp/long"
fi
if [ -s "$tmp/off" ]; then
  echo "fix with (from $(pwd)):"
  echo "  $cf -i $(tr '\n' ' ' <"$tmp/off" | sed 's/ $//')"
fi
echo "(checked with $("$cf" --version); CI uses Debian bookworm's clang-format 14)"
exit 1
