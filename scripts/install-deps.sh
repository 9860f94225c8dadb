#!/usr/bin/env bash
# Install what mlprof's make targets need on Debian 12. Idempotent and quick
# when everything is already there.
#   install-deps.sh build    cmake, make, gcc, clang, python3, protoc, libpapi, libsqlite3 and libdw1 (run time),
#                            Open MPI (openmpi-bin, libopenmpi-dev) and python3-mpi4py
#   install-deps.sh viewer   chromium, node, npm + tests/viewer/node_modules
#   install-deps.sh torch    Debian's python3-torch, -numpy, -pytest, -pip, -setuptools, and libtorch-dev
#                            (torch's C++ headers: mlprof.torch's native extension)
set -eu

# Another apt-get or dpkg at work (an unattended upgrade, a second make check)
# holds dpkg's lock: wait for it rather than fail the install.
apt_get() {
    apt-get -o DPkg::Lock::Timeout=600 "$@"
}

root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}

# ensure CMD:PACKAGE ... -- apt-get installs the packages whose command is missing.
ensure() {
    missing=
    for pair in "$@"; do
        command -v "${pair%%:*}" >/dev/null 2>&1 || missing="$missing ${pair#*:}"
    done
    [ -z "$missing" ] && return 0
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "install-deps: missing packages:$missing" >&2
        echo "install-deps: install them (as root: apt-get install$missing) and retry" >&2
        exit 1
    fi
    echo "install-deps: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt_get update -q
    # shellcheck disable=SC2086
    apt_get install -y -q --no-install-recommends $missing
}

# ensure_pkg PACKAGE -- apt-get installs a package that has no command to look for.
ensure_pkg() {
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "install-deps: missing package: $1 (as root: apt-get install $1)" >&2
        exit 1
    fi
    echo "install-deps: installing $1"
    export DEBIAN_FRONTEND=noninteractive
    apt_get update -q
    apt_get install -y -q --no-install-recommends "$1"
}

case "$mode" in
build)
    ensure cmake:cmake make:make gcc:gcc clang:clang python3:python3 pkg-config:pkg-config
    # the Perfetto protobuf test decodes mlprof's traces with protoc (tests/proto)
    ensure protoc:protobuf-compiler
    # stacks_crash_sampler crashes mlprof's sampler thread under gdb
    ensure gdb:gdb
    # the ASan+UBSan suite builds with clang: its sanitizer runtime is a package of its own
    rt=$(clang -print-file-name=libclang_rt.asan-x86_64.a)
    if [ ! -f "$rt" ]; then
        major=$(clang -dumpversion | cut -d. -f1)
        ensure_pkg "libclang-rt-$major-dev"
    fi
    # PAPI is loaded at run time when a user asks for papi: counters; the tests use the real one
    ldconfig -p 2>/dev/null | grep -q 'libpapi\.so' || ensure_pkg libpapi7.0
    # mlprof export --sqlite loads SQLite at run time (dlopen); its test uses the real one
    ldconfig -p 2>/dev/null | grep -q 'libsqlite3\.so\.0' || ensure_pkg libsqlite3-0
    # sampled call stacks are unwound by DWARF CFI through elfutils' libdw, loaded at run time
    # (dlopen libdw.so.1; no headers needed); the stacks test checks it without frame pointers
    ldconfig -p 2>/dev/null | grep -q 'libdw\.so\.1' || ensure_pkg libdw1
    # distributed runs (issue 20): the mpi hook's tests run Open MPI's mpirun, build with
    # mpicc and run an mpi4py script
    ensure mpirun:openmpi-bin mpicc:libopenmpi-dev
    /usr/bin/python3 -c "import mpi4py" >/dev/null 2>&1 || ensure_pkg python3-mpi4py
    ;;
viewer)
    ensure chromium:chromium node:nodejs npm:npm
    dir=$root/tests/viewer
    lock=$dir/package-lock.json
    if [ ! -d "$dir/node_modules" ] || { [ -f "$lock" ] && [ "$lock" -nt "$dir/node_modules" ]; }; then
        echo "install-deps: installing npm packages in tests/viewer"
        # --engine-strict: a package that needs a newer node than this one (Debian 12's is
        # 18) fails here, by name, rather than when the test starts the browser
        if [ -f "$lock" ]; then (cd "$dir" && npm ci --engine-strict --no-audit --no-fund)
        else (cd "$dir" && npm install --engine-strict --no-audit --no-fund); fi
        touch "$dir/node_modules"
    fi
    ;;
torch)
    # Debian's PyTorch (CPU) and numpy, for the tests that check mlprof against torch's
    # own profiler and run real programs; pytest, pip and setuptools for the Python
    # bindings' tests; /usr/bin/python3 is the interpreter that sees Debian's packages
    py=/usr/bin/python3
    for pair in torch:python3-torch numpy:python3-numpy pytest:python3-pytest pip:python3-pip \
                setuptools:python3-setuptools; do
        if ! [ -x $py ] || ! $py -c "import ${pair%%:*}" >/dev/null 2>&1; then
            ensure_pkg "${pair#*:}"
        fi
    done
    # torch's C++ headers (and g++) for mlprof.torch's native extension (RecordFunction callbacks)
    [ -f /usr/include/ATen/record_function.h ] || ensure_pkg libtorch-dev
    command -v g++ >/dev/null 2>&1 || ensure_pkg g++
    ;;
*)
    echo "usage: $0 build|viewer|torch" >&2
    exit 2
    ;;
esac
