#!/bin/sh
# exit_status.sh COMMAND [ARGS...]: runs COMMAND, its output unchanged; a status other than 0 ends it with
# "exit_status.sh: exit status N". For tests judged by PASS_REGULAR_EXPRESSION (a pattern of what a
# successful command prints), which makes CTest ignore the exit status: their FAIL_REGULAR_EXPRESSION
# matches this line (memplan_status_counts in tests/CMakeLists.txt), so a crash or an error exit after the
# expected output fails the test.
"$@"
rc=$?
[ "$rc" -eq 0 ] || echo "exit_status.sh: exit status $rc"
exit "$rc"
