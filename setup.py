"""pip install . -- chorus_torch, chorus as a torch.distributed backend.

Builds the extension against the torch of the environment pip runs in (so
pip needs --no-build-isolation: the build must see that torch, not a fresh
one from PyPI) and puts libchorus into the wheel beside it (chorus_torch/lib,
found through the extension's RUNPATH), so the wheel needs no chorus
installation. Which libchorus:

  CHORUS_PREFIX=<prefix>   an installed chorus (cmake --install): its
                           include/ and lib/libchorus.so.0
  (unset)                  built here with CMake, target chorus only, in
                           build/pip-libchorus (needs chorus' build
                           dependencies: hwloc, rdma-core, libfabric)

libchorus' own dependencies (libhwloc, libibverbs, libfabric, ...) are the
system's, as for any chorus program. README.md "PyTorch" has the commands.
"""

import glob
import os
import re
import shutil
import subprocess

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.join("bindings", "pytorch")


def project_version():
    with open(os.path.join(HERE, "CMakeLists.txt")) as cmake:
        return re.search(r"project\(chorus VERSION ([0-9.]+)", cmake.read()).group(1)


def libchorus():
    """(include directories, the libchorus.so.0 to link and carry)."""
    prefix = os.environ.get("CHORUS_PREFIX")
    if prefix:
        found = [path for lib in ("lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu")
                 for path in glob.glob(os.path.join(prefix, lib, "libchorus.so.0"))]
        if not found or not os.path.exists(os.path.join(prefix, "include", "chorus", "chorus.hpp")):
            raise SystemExit(f"chorus_torch: CHORUS_PREFIX={prefix} has no include/chorus/chorus.hpp and "
                             "lib/libchorus.so.0: point it at a prefix chorus was installed into (cmake --install)")
        return [os.path.join(prefix, "include")], os.path.realpath(found[0])
    build = os.path.join(HERE, "build", "pip-libchorus")
    print(f"chorus_torch: building libchorus with CMake in {build} (set CHORUS_PREFIX to use an installed one)",
          flush=True)
    subprocess.check_call(["cmake", "-S", HERE, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                           "-DCHORUS_BUILD_TESTS=OFF"])
    subprocess.check_call(["cmake", "--build", build, "--target", "chorus", "--parallel", str(os.cpu_count() or 2)])
    return [os.path.join(HERE, "include"), os.path.join(build, "include")], \
        os.path.realpath(os.path.join(build, "libchorus.so.0"))


class BuildWithLibchorus(BuildExtension):
    """Builds the extension, then carries libchorus.so.0 into chorus_torch/lib."""

    def run(self):
        super().run()
        targets = [os.path.join(self.build_lib, "chorus_torch", "lib")]
        if self.inplace:  # pip install -e: the package directory is the source tree's
            targets.append(os.path.join(HERE, BINDINGS, "chorus_torch", "lib"))
        for target in targets:
            os.makedirs(target, exist_ok=True)
            carried = os.path.join(target, "libchorus.so.0")
            shutil.copy2(LIBCHORUS, carried)
            if shutil.which("strip"):  # a RelWithDebInfo libchorus is 9 MB of debug info
                subprocess.call(["strip", "--strip-debug", carried])


INCLUDES, LIBCHORUS = libchorus()
TORCH_MAJOR = int(torch.__version__.split(".")[0])

setup(
    name="chorus-torch",
    version=project_version(),
    description="chorus as a torch.distributed backend (init_process_group(\"chorus\"))",
    license="see LICENSE",
    packages=["chorus_torch"],
    package_dir={"chorus_torch": os.path.join(BINDINGS, "chorus_torch")},
    ext_modules=[
        CppExtension(
            "chorus_torch._C",
            sorted(glob.glob(os.path.join(BINDINGS, "src", "*.cc"))),
            include_dirs=INCLUDES,
            define_macros=[("CHORUS_TORCH_MAJOR", str(TORCH_MAJOR))],
            # chorus' headers are C++20; torch's flags ask for C++17 first and the last -std wins.
            extra_compile_args={"cxx": ["-std=c++20", "-Wno-unused-parameter", "-fvisibility=hidden"]},
            extra_objects=[LIBCHORUS],
            extra_link_args=["-Wl,-rpath,$ORIGIN/lib"],
        )
    ],
    cmdclass={"build_ext": BuildWithLibchorus},
    options={"build": {"build_base": os.path.join("build", "pip")}},
    python_requires=">=3.8",
    zip_safe=False,
)
