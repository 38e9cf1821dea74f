#!/usr/bin/env bash
# Runs the Go fuzz targets, each for FUZZTIME.
#
#   scripts/fuzz.sh                      every target (func Fuzz… in *_test.go)
#   scripts/fuzz.sh httpapi.FuzzSubmit agent   some targets, or every target of a package
#
# A package's test binary is built once with fuzzing instrumentation and run
# once per target (Go fuzzes one target per run). What a target finds
# interesting stays in FUZZ_CACHE across runs; a failing input is written to
# the package's testdata/fuzz/<Target>/ by Go itself, where plain `go test`
# replays it. FUZZ_SAVE=N also copies up to N of the smallest interesting
# inputs (at most FUZZ_SAVE_MAX_BYTES each) into testdata/fuzz/<Target>/, to
# be committed as corpus.
#
# FUZZTIME            per target, a duration or Nx (default 30s)
# FUZZ_MINIMIZETIME   spent shrinking each new interesting input (default 2s;
#                     Go's own 60s starves the targets that drive the whole
#                     gateway, whose background work makes most inputs new)
# FUZZ_PARALLEL       fuzzing workers per target (default: GOMAXPROCS)
# FUZZ_SAVE           inputs to keep per target (default 0)
# FUZZ_SAVE_MAX_BYTES largest input FUZZ_SAVE keeps (default 2048)
# FUZZ_CACHE          where interesting inputs accumulate (default: under GOCACHE)
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}
FUZZ_MINIMIZETIME=${FUZZ_MINIMIZETIME:-2s}
FUZZ_PARALLEL=${FUZZ_PARALLEL:-}
FUZZ_SAVE=${FUZZ_SAVE:-0}
FUZZ_SAVE_MAX_BYTES=${FUZZ_SAVE_MAX_BYTES:-2048}
FUZZ_CACHE=${FUZZ_CACHE:-$($GO env GOCACHE)/wamux-fuzz}
module=$($GO list -m)

# targets lists "dir name" for every fuzz target, sorted.
targets() {
  git ls-files '*_test.go' | xargs grep -H '^func Fuzz[A-Za-z0-9_]*(f \*testing.F)' |
    sed -E 's|^(.*)/[^/]*:func (Fuzz[A-Za-z0-9_]*)\(.*|\1 \2|; s|^[^ /]*:func (Fuzz[A-Za-z0-9_]*)\(.*|. \1|' | sort -u
}

# selected keeps the targets matching any argument: "pkg" (a directory)
# or "pkg.FuzzName"; all of them without arguments.
selected() {
  if [ $# -eq 0 ]; then targets; return; fi
  targets | while read -r dir name; do
    for want in "$@"; do
      if [ "$want" = "$dir" ] || [ "$want" = "$dir.$name" ]; then echo "$dir $name"; break; fi
    done
  done
}

# save copies up to FUZZ_SAVE of the smallest new inputs of target name from
# the cache into dir/testdata/fuzz/name.
save() {
  local dir=$1 name=$2 from=$3 to=$1/testdata/fuzz/$2 n=0 f
  [ "$FUZZ_SAVE" -gt 0 ] && [ -d "$from" ] || return 0
  mkdir -p "$to"
  n=$(find "$to" -type f | wc -l)
  while read -r _ f; do
    [ "$n" -lt "$FUZZ_SAVE" ] || break
    [ -e "$to/$(basename "$f")" ] && continue
    cp "$f" "$to/" && n=$((n + 1))
  done < <(find "$from" -type f -size -"$((FUZZ_SAVE_MAX_BYTES + 1))"c -printf '%s %p\n' | sort -n)
  echo "fuzz: $dir $name: $n inputs in $to"
}

list=$(selected "$@")
[ -n "$list" ] || { echo "fuzz: no target matches: $*" >&2; exit 2; }
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
log=$bin/log
failed=()
for dir in $(echo "$list" | cut -d' ' -f1 | uniq); do
  test=$bin/$(echo "$dir" | tr / _).test
  start=$(date +%s)
  $GO test -c -fuzz=. -o "$test" "./$dir"
  echo "fuzz: built $dir in $(( $(date +%s) - start )) s"
  for name in $(echo "$list" | awk -v d="$dir" '$1 == d { print $2 }'); do
    cache=$FUZZ_CACHE/$module/$dir
    start=$(date +%s)
    # The binary runs in its package directory: that is where it finds
    # testdata/fuzz/<name> and writes a failing input.
    if (cd "$dir" && "$test" -test.run='^$' -test.fuzz="^$name\$" -test.fuzztime="$FUZZTIME" \
        -test.fuzzminimizetime="$FUZZ_MINIMIZETIME" -test.fuzzcachedir="$cache" -test.timeout=0 ${FUZZ_PARALLEL:+-test.parallel=$FUZZ_PARALLEL}) >"$log" 2>&1; then
      echo "fuzz: ok   $dir $name ($(grep -o 'execs: [0-9]*' "$log" | tail -1), $(( $(date +%s) - start )) s)"
    else
      echo "fuzz: FAIL $dir $name"; cat "$log"
      failed+=("$dir.$name")
    fi
    save "$dir" "$name" "$cache/$name"
  done
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]} (the input is in <pkg>/testdata/fuzz/<target>/; go test -run '<target>/<file>' ./<pkg> replays it)" >&2
  exit 1
fi
