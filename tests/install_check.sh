#!/usr/bin/env bash
# Installs mlprof into a temporary prefix and builds a program against it two
# ways: CMake's find_package(mlprof) and pkg-config. Then runs both.
set -eu
src=$1
build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null

mkdir -p "$work/app"
cat >"$work/app/app.c" <<'C'
#include <mlprof/mlprof.h>
#include <stdio.h>
int main(void)
{
    mlprof_span *s = mlprof_task_create(mlprof_domain_create("app"), "step");
    if (mlprof_set_config("filename", "app.json") || mlprof_set_state(MLPROF_STATE_RUN))
        return 1;
    MLPROF_BEGIN(s);
    MLPROF_END(s);
    printf("linked mlprof %s (header %s)\n", mlprof_version_string(), MLPROF_VERSION_STRING);
    return mlprof_dump(1);
}
C
cat >"$work/app/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.16)
project(app C)
find_package(mlprof 0.1 REQUIRED)
add_executable(app app.c)
target_link_libraries(app PRIVATE mlprof::mlprof)
add_executable(app_static app.c)
target_link_libraries(app_static PRIVATE mlprof::mlprof_static)
C
cmake -S "$work/app" -B "$work/app/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/app/build" >/dev/null
(cd "$work" && LD_LIBRARY_PATH="$work/prefix/lib" ./app/build/app && ./app/build/app_static)

export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
cc "$work/app/app.c" -o "$work/app_pc" $(pkg-config --cflags --libs mlprof)
(cd "$work" && LD_LIBRARY_PATH="$work/prefix/lib" ./app_pc)
soname=$(objdump -p "$work/prefix/lib/libmlprof.so" | awk '/SONAME/ {print $2}')
echo "soname: $soname"
[ "$soname" = "libmlprof.so.0" ]
test -f "$work/app.json"
echo "install check: 3 programs built and run against the installed library"
