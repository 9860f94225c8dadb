"""pip's build of the package: the Python files (pyproject.toml), and
mlprof.torch's native extension (mlprof/_torch_native.cpp, loaded with
ctypes) where the building interpreter has torch and its C++ headers. Where
it cannot be built, the package installs without it and mlprof.torch uses its
dispatch-mode path: the reason is printed here and, once, when tracing."""
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _torch_extension():
    """The extension, or None with the reason on stderr."""
    if os.environ.get("MLPROF_TORCH_NATIVE", "") in ("0", "off", "no", "false"):
        print("mlprof: native torch extension not built (MLPROF_TORCH_NATIVE=0)", file=sys.stderr)
        return None
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError as e:  # pip's isolated build env has no torch: --no-build-isolation builds it
        print(f"mlprof: native torch extension not built (no torch here: {e}; "
              "pip install --no-build-isolation builds it)", file=sys.stderr)
        return None
    inc = cpp_extension.include_paths()
    if not any(os.path.exists(os.path.join(d, "ATen", "record_function.h")) for d in inc):
        print("mlprof: native torch extension not built (no torch C++ headers; Debian: libtorch-dev)",
              file=sys.stderr)
        return None
    libs = cpp_extension.library_paths()
    return Extension(
        "mlprof._torch_native", ["mlprof/_torch_native.cpp"], language="c++",
        include_dirs=inc, library_dirs=libs, runtime_library_dirs=libs, libraries=["torch_cpu", "c10"],
        define_macros=[("_GLIBCXX_USE_CXX11_ABI", str(int(torch._C._GLIBCXX_USE_CXX11_ABI)))],
        extra_compile_args=["-std=c++17", "-O2", "-fvisibility=hidden"])


class _OptionalBuild(build_ext):
    """A failed compile leaves the extension out, not the package."""

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001 (any compiler failure)
            print(f"mlprof: native torch extension not built ({e}); mlprof.torch uses its dispatch mode",
                  file=sys.stderr)


ext = _torch_extension()
setup(ext_modules=[ext] if ext else [], cmdclass={"build_ext": _OptionalBuild})
