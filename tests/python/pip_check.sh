#!/usr/bin/env bash
# The Python package installs with pip from the checkout (no compiler: it is
# ctypes over the C library) and works from where it was installed.
# usage: pip_check.sh SOURCE_DIR LIBMLPROF PYTHON
set -eu
src=$1 lib=$2 py=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp -r "$src/python" "$dir/src" # pip builds in the source folder: keep the checkout clean
"$py" -m pip install --quiet --no-build-isolation --no-deps --target "$dir/site" "$dir/src"
cd "$dir"
out=$(LIBMLPROF_PATH="$lib" PYTHONPATH="$dir/site" "$py" -c '
import json, os, mlprof
assert mlprof.__file__.startswith(os.environ["PYTHONPATH"]), mlprof.__file__
mlprof.set_config(filename="pip.json")
t = mlprof.Domain("pip").new_task("installed")
mlprof.set_state("run")
with t:
    pass
print(sum(1 for e in json.load(open(mlprof.dump()))["traceEvents"] if e["name"] == "installed"), mlprof.version())
')
echo "pip_check: $out"
[ "${out%% *}" = 1 ] || { echo "pip_check: the installed package did not record the span" >&2; exit 1; }
