#!/usr/bin/env bash
# Mutation testing of wirebench-core with cargo-mutants: each file's functions are broken
# one small way at a time (a body replaced by a default, an operator swapped, a condition
# forced), the core tests run against each, and a mutant no test notices is a rule the
# tests do not pin. Not run in CI: a run takes minutes per file.
#
#   bench/mutants.sh [--budget SECS] [--test-timeout SECS] [--jobs N] [--tests FILTERS | --all-tests] [--re REGEX]
#                    [--from N] [--out DIR] [FILE...]
#
# FILE is a path under crates/wirebench-core/src (mesh/verdict.rs); none means every file
# of the crate. Each file gets at most --budget seconds (default 900), each mutant's tests
# at most --test-timeout (default 30: a mutant that makes a loop endless); a file cut short
# shows how many of its mutants were tried. By default each file's mutants run only the
# tests of its own module (mesh/verdict.rs: mesh::verdict::), which keeps a mutant to a
# few seconds; --tests "mesh::verdict:: mesh::matrix::" names the tests to run instead (for
# a module also tested through its callers), --all-tests runs every core test (slow);
# --re tries only the mutants whose names match (to re-check survivors after a fix); --from N
# starts at the file's N-th mutant in --list order (mutants run in that order, so a file a
# budget cut after N-1 goes on where it stopped; one file at a time). A file
# whose default filter names no test (no tests of its own) is skipped with a note: name the
# module that tests it with --tests.
#
# Prints, per file, the mutants caught, missed, timed out (counted as caught: the tests
# did not pass) and unviable (did not compile), the catch rate (caught and timed out over
# viable), then every surviving mutant with the reason it is harmless from
# bench/mutants-harmless.txt, or "not explained".
#
# Needs cargo-mutants (not installed by this script):
#   cargo install --locked cargo-mutants
set -euo pipefail

budget=900
test_timeout=30
jobs=1
all_tests=0
tests=""
re=()
from=1
root=$(git rev-parse --show-toplevel)
out="$root/target/mutants"
src=crates/wirebench-core/src
harmless="$root/bench/mutants-harmless.txt"
files=()
while [ $# -gt 0 ]; do
    case "$1" in
        --budget) budget=$2; shift 2 ;;
        --test-timeout) test_timeout=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --all-tests) all_tests=1; shift ;;
        --tests) tests=$2; shift 2 ;;
        --re) re=(-F "$2"); shift 2 ;;
        --from) from=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h | --help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
        *) files+=("${1#"$src"/}"); shift ;;
    esac
done

if ! cargo mutants --version >/dev/null 2>&1; then
    echo "cargo-mutants is not installed; install it with: cargo install --locked cargo-mutants" >&2
    exit 2
fi
cd "$root"
if [ ${#files[@]} -eq 0 ]; then
    mapfile -t files < <(cd "$src" && find . -name '*.rs' ! -name tests.rs ! -path '*/tests/*' | sed 's|^\./||' | sort)
fi
for f in "${files[@]}"; do
    [ -f "$src/$f" ] || { echo "$src/$f: no such file" >&2; exit 2; }
done
mkdir -p "$out"
# Mutants of one file after another share one target directory: the crates the core
# depends on are built once, not once per file. Debug info is left out (faster links).
export CARGO_TARGET_DIR="$out/target" CARGO_PROFILE_DEV_DEBUG=0 CARGO_PROFILE_TEST_DEBUG=0

count() { if [ -f "$1" ]; then grep -c . "$1" || true; else echo 0; fi; }

rows=()
survivors=()
for f in "${files[@]}"; do
    name=${f//\//_}
    dir="$out/${name%.rs}"
    rm -rf "$dir"
    if [ "$from" -gt 1 ]; then
        # The mutants from the N-th on, each named by an anchored, escaped pattern.
        re=()
        while IFS= read -r name; do
            re+=(-F "^$(sed 's/[][\.+*?()|{}^$]/\\&/g' <<<"$name")\$")
        done < <(cargo mutants -p wirebench-core -f "$src/$f" --list 2>/dev/null | tail -n +"$from")
        [ ${#re[@]} -gt 0 ] || { echo "== $f: fewer than $from mutants" >&2; continue; }
    fi
    listed=$(cargo mutants -p wirebench-core -f "$src/$f" "${re[@]}" --list 2>/dev/null | grep -c . || true)
    if [ "$listed" -eq 0 ]; then
        continue
    fi
    # libtest filters after a second "--": several may be given
    filter=(--)
    if [ -n "$tests" ]; then
        read -ra more <<<"$tests"
        filter+=("${more[@]}")
    elif [ "$all_tests" -eq 0 ]; then
        module=${f%.rs}
        filter+=("${module//\//::}::")
    fi
    # A filter that names no test would let every mutant survive: say so and skip the file.
    if [ "$all_tests" -eq 0 ]; then
        ntests=$(cargo test -q -p wirebench-core --lib -- --list "${filter[@]:1}" 2>/dev/null | grep -c ': test$' || true)
        if [ "$ntests" -eq 0 ]; then
            echo "== $f: no test matches '${filter[*]:1}' (no tests of its own?): skipped; name the module that tests it with --tests" >&2
            continue
        fi
    fi
    echo "== $f: $listed mutants, at most ${budget}s, tests: ${filter[*]:1}" >&2
    # INT lets cargo-mutants stop cleanly and keep what it found so far. One module's tests
    # take a second or two: a mutant still running at --test-timeout loops (counted caught).
    timeout --signal=INT --kill-after=60 "$budget" \
        nice cargo mutants -p wirebench-core -f "$src/$f" "${re[@]}" --jobs "$jobs" --no-shuffle \
        --timeout "$test_timeout" --build-timeout 600 --cargo-arg=--lib -o "$dir" -- "${filter[@]}" >"$dir.log" 2>&1 || true
    m="$dir/mutants.out"
    caught=$(count "$m/caught.txt")
    missed=$(count "$m/missed.txt")
    timedout=$(count "$m/timeout.txt")
    unviable=$(count "$m/unviable.txt")
    viable=$((caught + missed + timedout))
    tried=$((viable + unviable))
    rate="-"
    [ "$viable" -eq 0 ] || rate=$(awk -v c=$((caught + timedout)) -v v="$viable" 'BEGIN { printf "%.0f %%", 100 * c / v }')
    rows+=("$(printf '| %s | %d | %d | %d | %d | %d of %d | %s |' "$f" "$caught" "$missed" "$timedout" "$unviable" "$tried" "$listed" "$rate")")
    if [ -f "$m/missed.txt" ]; then
        while IFS= read -r line; do survivors+=("$line"); done <"$m/missed.txt"
    fi
done

echo
echo "| file | caught | missed | timeout | unviable | tried | caught of viable |"
echo "|---|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
total_c=0 total_m=0 total_t=0
for r in "${rows[@]}"; do
    IFS='|' read -r _ _ c m t _ <<<"$r"
    total_c=$((total_c + c)) total_m=$((total_m + m)) total_t=$((total_t + t))
done
if [ $((total_c + total_m + total_t)) -gt 0 ]; then
    awk -v c=$((total_c + total_t)) -v v=$((total_c + total_m + total_t)) \
        'BEGIN { printf "| all | | | | | | %.1f %% (%d of %d) |\n", 100 * c / v, c, v }'
fi

# bench/mutants-harmless.txt: a "# reason" line, then the mutants it explains, as
# "path: description" (cargo-mutants' name without its line and column).
echo
echo "Surviving mutants:"
[ ${#survivors[@]} -gt 0 ] || echo "  none"
for s in "${survivors[@]}"; do
    key=$(sed -E 's/^([^:]+):[0-9]+:[0-9]+: /\1: /' <<<"$s")
    why=$(awk -v key="$key" '/^#/ { reason = substr($0, 3); next } $0 == key { print reason; exit }' "$harmless" 2>/dev/null || true)
    echo "  $s"
    echo "      harmless: ${why:-not explained}"
done
