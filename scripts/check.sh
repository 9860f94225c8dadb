#!/usr/bin/env bash
# make check: builds mlprof three ways (plain, ASan+UBSan, TSan), runs every
# test in each with ctest, and ends with one line: "N passed, M failed".
#
# The tests leave about half of the CPU idle (they wait on threads, sleeps and
# child processes), so each suite's build runs while the suite before it is
# tested: plain build; plain tests beside the ASan build; ASan tests beside the
# TSan build; TSan tests. What each step took is printed, and the total.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=$(nproc 2>/dev/null || echo 2)
started=$SECONDS

bash scripts/install-deps.sh build || exit 1
viewer=ON
if ! bash scripts/install-deps.sh viewer; then
    echo "check: the viewer test needs chromium and npm; it will fail" >&2
fi
if ! bash scripts/install-deps.sh torch; then
    echo "check: the tests against PyTorch's profiler need python3-torch; they will fail" >&2
fi
echo "== dependencies: $((SECONDS - started)) s"

passed=0
failed=0
failed_names=()

# build_suite DIR CMAKE_ARGS... -- configures and builds into DIR, output in
# DIR.build.log; writes how long it took to DIR.build.time. Status 0 if built.
build_suite() {
    local dir=$1 t0=$SECONDS rc=0
    shift
    { cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" &&
      cmake --build "$dir" -j "$jobs"; } >"$dir.build.log" 2>&1 || rc=1
    echo $((SECONDS - t0)) >"$dir.build.time"
    return $rc
}

# test_suite NAME DIR BUILD_STATUS -- reports the build, then runs ctest in DIR
# and counts its tests.
test_suite() {
    local name=$1 dir=$2 built=$3 t0=$SECONDS
    echo "== $name: configured and built ($dir) in $(cat "$dir.build.time" 2>/dev/null || echo '?') s"
    if [ "$built" -ne 0 ]; then
        tail -40 "$dir.build.log"
        echo "== $name: BUILD FAILED"
        failed=$((failed + 1))
        failed_names+=("$name:build")
        return
    fi
    ctest --test-dir "$dir" --output-on-failure -j "$jobs" >"$dir.test.log" 2>&1
    grep -E "Test +#|tests passed|FAILED|Failed" "$dir.test.log"
    local p f
    p=$(grep -cE "Test +#.* Passed" "$dir.test.log")
    f=$(grep -cE "Test +#.*(Failed|Timeout|Exception|Not Run)" "$dir.test.log")
    if [ "$f" -gt 0 ]; then
        sed -n '/The following tests FAILED/,$p' "$dir.test.log"
        grep -B2 -A40 -E "\*\*\*(Failed|Timeout|Exception)" "$dir.test.log" | head -200
        # what the tests said of their failures, wherever in their output (the lines above stop at 40)
        echo "-- the failing tests' own messages ($dir.test.log has everything):"
        grep -E "^(FAIL|SKIP)|FAIL:|Traceback|Error|error:|^---|^    (thread|#[0-9])" "$dir.test.log" | head -150
        failed_names+=("$name")
    fi
    echo "== $name: tested in $((SECONDS - t0)) s"
    passed=$((passed + p))
    failed=$((failed + f))
}

asan_args=(-DCMAKE_C_COMPILER=clang -DMLPROF_SANITIZE=address -DMLPROF_BUILD_BENCH=OFF)
tsan_args=(-DMLPROF_SANITIZE=thread -DMLPROF_BUILD_BENCH=OFF)

echo "== plain: configure and build (build)"
build_suite build -DMLPROF_VIEWER_TEST=$viewer
plain_built=$?
# clang here, gcc elsewhere: the library builds warning-free with both
echo "== asan+ubsan/clang: configure and build (build-asan), beside the plain tests"
build_suite build-asan "${asan_args[@]}" &
asan_pid=$!
test_suite plain build $plain_built
wait $asan_pid
asan_built=$?
echo "== tsan: configure and build (build-tsan), beside the asan+ubsan tests"
build_suite build-tsan "${tsan_args[@]}" &
tsan_pid=$!
test_suite asan+ubsan/clang build-asan $asan_built
wait $tsan_pid
tsan_built=$?
test_suite tsan build-tsan $tsan_built

echo
if [ "$failed" -gt 0 ]; then
    echo "check: failures in: ${failed_names[*]}"
fi
echo "check: took $((SECONDS - started)) s"
echo "check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
