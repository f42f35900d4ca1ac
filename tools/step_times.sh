#!/usr/bin/env bash
# Times the steps of `make test` and prints them as one table at the end.
#
#   tools/step_times.sh run NAME COMMAND...   runs COMMAND; when $STEP_TIMES names a file,
#                                             appends "NAME<TAB>MILLISECONDS<TAB>ok|failed (STATUS)"
#                                             to it; exits with COMMAND's status
#   tools/step_times.sh table FILE            prints FILE's steps, their wall times and the
#                                             total, then removes FILE
#
# The Makefile records a step even when it fails, and prints the table after the last step
# that ran, so a red run still says where its time went. Times are wall-clock seconds, with
# everything else the machine runs at the time counted in.
set -uo pipefail

case "${1:-}" in
run)
    name=$2
    shift 2
    start=$(date +%s%N)
    "$@"
    status=$?
    if [ -n "${STEP_TIMES:-}" ]; then
        outcome=ok
        [ "$status" = 0 ] || outcome="failed ($status)"
        printf '%s\t%s\t%s\n' "$name" "$((($(date +%s%N) - start) / 1000000))" "$outcome" \
            >> "$STEP_TIMES"
    fi
    exit "$status"
    ;;
table)
    file=$2
    [ -s "$file" ] || exit 0
    echo
    echo "== time of each step (wall clock, $(nproc) cores, load average now" \
        "$(cut -d' ' -f1-3 /proc/loadavg))"
    awk -F'\t' '
        function clock(ms,  s) { s = int(ms / 1000 + 0.5); return sprintf("%d min %02d s", int(s / 60), s % 60) }
        { printf "  %-44s %12s  %s\n", $1, clock($2), $3; total += $2 }
        END { printf "  %-44s %12s\n", "total", clock(total) }' "$file"
    rm -f "$file"
    ;;
*)
    echo "usage: $0 run NAME COMMAND... | $0 table FILE" >&2
    exit 2
    ;;
esac
