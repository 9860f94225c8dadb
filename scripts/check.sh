#!/usr/bin/env bash
# make check: builds mlprof three ways (plain, ASan+UBSan, TSan), runs every
# test in each with ctest, and ends with one line: "N passed, M failed".
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=$(nproc 2>/dev/null || echo 2)

bash scripts/install-deps.sh build || exit 1
viewer=ON
if ! bash scripts/install-deps.sh viewer; then
    echo "check: the viewer test needs chromium and npm; it will fail" >&2
fi
if ! bash scripts/install-deps.sh torch; then
    echo "check: the tests against PyTorch's profiler need python3-torch; they will fail" >&2
fi

passed=0
failed=0
failed_names=()

# run_suite NAME BUILD_DIR CMAKE_ARGS...
run_suite() {
    local name=$1 dir=$2
    shift 2
    echo "== $name: configure and build ($dir)"
    if ! cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null ||
       ! cmake --build "$dir" -j "$jobs" >"$dir.build.log" 2>&1; then
        cat "$dir.build.log" 2>/dev/null | tail -40
        echo "== $name: BUILD FAILED"
        failed=$((failed + 1))
        failed_names+=("$name:build")
        return
    fi
    echo "== $name: test"
    ctest --test-dir "$dir" --output-on-failure -j "$jobs" >"$dir.test.log" 2>&1
    grep -E "Test +#|tests passed|FAILED|Failed" "$dir.test.log"
    local p f
    p=$(grep -cE "Test +#.* Passed" "$dir.test.log")
    f=$(grep -cE "Test +#.*(Failed|Timeout|Exception|Not Run)" "$dir.test.log")
    if [ "$f" -gt 0 ]; then
        sed -n '/The following tests FAILED/,$p' "$dir.test.log"
        grep -B2 -A40 -E "\*\*\*(Failed|Timeout|Exception)" "$dir.test.log" | head -200
        failed_names+=("$name")
    fi
    passed=$((passed + p))
    failed=$((failed + f))
}

run_suite plain build -DMLPROF_VIEWER_TEST=$viewer
# clang here, gcc elsewhere: the library builds warning-free with both
run_suite asan+ubsan/clang build-asan -DCMAKE_C_COMPILER=clang -DMLPROF_SANITIZE=address \
    -DMLPROF_BUILD_BENCH=OFF
run_suite tsan build-tsan -DMLPROF_SANITIZE=thread -DMLPROF_BUILD_BENCH=OFF

echo
if [ "$failed" -gt 0 ]; then
    echo "check: failures in: ${failed_names[*]}"
fi
echo "check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
