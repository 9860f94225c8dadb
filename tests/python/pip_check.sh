#!/usr/bin/env bash
# The Python package installs with pip from the checkout (ctypes over the C
# library) and works from where it was installed; where the interpreter has
# torch and its C++ headers, with mlprof.torch's native extension built and
# loading from there.
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

# mlprof.torch's native path, where this torch has its headers
if "$py" -c 'import os, sys, torch.utils.cpp_extension as c
sys.exit(0 if any(os.path.exists(os.path.join(d, "ATen", "record_function.h")) for d in c.include_paths()) else 1)' \
        2>/dev/null; then
    native=$(cd "$dir" && LIBMLPROF_PATH="$lib" PYTHONPATH="$dir/site" "$py" -c '
import os, torch
from mlprof import torch_native
lib = torch_native.load()
assert lib is not None, torch_native.why()
print(os.path.dirname(lib._name) == os.path.join(os.environ["PYTHONPATH"], "mlprof"))
')
    echo "pip_check: native extension installed and loaded: $native"
    [ "$native" = True ] || { echo "pip_check: the installed native extension is not the one loaded" >&2; exit 1; }
else
    echo "pip_check: no torch C++ headers here: native extension not checked"
fi
