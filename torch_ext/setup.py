"""Builds overlap_ops._C from the canonical sources in ../aten, and the
test-only overlap_ops._testing_C (csrc/testing/) linked against it.

CPU sources always build. CUDA sources build when torch is a CUDA build and
nvcc is found (CUDA_HOME), unless OVERLAP_OPS_CUDA=0; OVERLAP_OPS_CUDA=1 makes
a missing toolkit an error instead of a silent CPU-only build.

Environment:
  OVERLAP_OPS_CUDA      auto (default) | 0 | 1
  TORCH_CUDA_ARCH_LIST  CUDA targets in PyTorch's form ("8.0;9.0+PTX"); 9.0
                        means sm_90a, which the Hopper kernels need
  OVERLAP_OPS_ARCHS     CUDA targets as nvcc names; wins over
                        TORCH_CUDA_ARCH_LIST. Default of both "90a;80":
                        sm_90a SASS for the Hopper kernels, sm_80 SASS +
                        compute_80 PTX for the SM80 kernels (JIT-compiled on
                        Hopper), both for the rest; see nvcc_targets.py
  CUTLASS_INCLUDE_DIR   CUTLASS headers; default: the nvidia-cutlass wheel
  MAX_JOBS              parallel compile jobs (ninja)
  OVERLAP_OPS_CUDA_SOURCES  regex on file names: compile only those CUDA
                        sources (compile checks; the result is not loadable)
"""

from __future__ import annotations

import copy
import glob
import os
import re
import shlex
import sys
from pathlib import Path

from setuptools import setup

_NO_TORCH = """overlap_ops: torch is not installed in this build environment.
The extension compiles against the torch it will run with, and pip builds
in an isolated environment without it unless told otherwise. Install torch
first, then build without isolation:
    pip install torch
    pip install --no-build-isolation ./torch_ext"""
try:
    import torch
    from torch.utils import cpp_extension
except ImportError as exc:
    raise SystemExit(_NO_TORCH) from exc

ROOT = Path(__file__).resolve().parent
REPO = ROOT.parent
ATEN = REPO / "aten" / "src"
sys.path.insert(0, str(ROOT))
import build_requirements  # noqa: E402  (next to this file)
import nvcc_targets  # noqa: E402

IS_HIP = cpp_extension.IS_HIP_EXTENSION

TESTED_TORCH = ((2, 11), (2, 14))


def _torch_minor() -> tuple[int, int]:
    major, minor = torch.__version__.split(".")[:2]
    return int(major), int(minor)


def _warn_untested_torch() -> None:
    low, high = TESTED_TORCH
    if _torch_minor() < low:
        print(f"overlap_ops: warning: torch {torch.__version__} is older "
              f"than {low[0]}.{low[1]}, the oldest release this builds "
              "against", file=sys.stderr)
    elif _torch_minor() > high:
        print(f"overlap_ops: note: torch {torch.__version__} is newer than "
              f"{high[0]}.{high[1]}, the newest tested release",
              file=sys.stderr)


def _check_build_requirements(cuda: bool) -> None:
    # pip installs none of them without build isolation. CUTLASS only
    # matters to the CUDA build, and CUTLASS_INCLUDE_DIR replaces it.
    skip_cutlass = not cuda or os.environ.get("CUTLASS_INCLUDE_DIR")
    needed = [r for r in build_requirements.declared("build")
              if not (skip_cutlass and r.startswith("nvidia-cutlass"))]
    unmet = build_requirements.unmet(needed)
    if unmet:
        raise SystemExit(
            f"overlap_ops: the build needs {', '.join(unmet)}. Install the "
            "build requirements of torch_ext/pyproject.toml first: pip "
            f"install {shlex.join(needed)} (./build.sh does this)")


def _want_cuda() -> bool:
    mode = os.environ.get("OVERLAP_OPS_CUDA", "auto").lower()
    have_nvcc = cpp_extension.CUDA_HOME is not None and Path(
        cpp_extension.CUDA_HOME, "bin", "nvcc").exists()
    have = torch.version.cuda is not None and have_nvcc
    if mode not in ("auto", "0", "off", "no", "1", "on", "yes"):
        raise SystemExit(
            f"overlap_ops: OVERLAP_OPS_CUDA must be auto, 0/off/no or "
            f"1/on/yes, got {mode!r}")
    if mode in ("0", "off", "no"):
        return False
    if mode in ("1", "on", "yes") and not have:
        raise SystemExit(
            "overlap_ops: OVERLAP_OPS_CUDA=1 but no CUDA build is possible: "
            f"torch.version.cuda={torch.version.cuda}, "
            f"CUDA_HOME={cpp_extension.CUDA_HOME} (set CUDA_HOME to a toolkit "
            "with bin/nvcc)")
    return have


def _rel(paths: list[str]) -> list[str]:
    # setuptools wants paths relative to setup.py's directory.
    return sorted(os.path.relpath(p, ROOT) for p in paths)


def _needs_toolkit(path: str) -> bool:
    # Host code that includes CUDA/HIP headers is named *CUDA.cpp / *HIP.cpp
    # or lives in native/cuda/; every other .cpp is portable host code.
    return ("/native/cuda/" in path or path.endswith("CUDA.cpp")
            or path.endswith("HIP.cpp"))


def _aten_sources(suffix: str) -> list[str]:
    # aten/src/ATen/test/ holds the series' C++ tests, each a gtest program
    # (tools/checks/run_cpp_tests.sh), not library code.
    found = glob.glob(str(ATEN / "ATen" / "**" / f"*{suffix}"), recursive=True)
    tests = str(ATEN / "ATen" / "test") + os.sep
    return [p for p in found if not p.startswith(tests)]


def _cpu_sources() -> list[str]:
    found = _aten_sources(".cpp")
    shim = glob.glob(str(ROOT / "csrc" / "*.cpp"))
    return _rel([p for p in found if not _needs_toolkit(p)] + shim)


def _cuda_sources() -> list[str]:
    found = _aten_sources(".cpp")
    found = [p for p in found if _needs_toolkit(p) and not p.endswith("HIP.cpp")]
    found += _aten_sources(".cu")
    # Compile checks (tools/checks/check_cuda_compile.sh) build a subset.
    only = os.environ.get("OVERLAP_OPS_CUDA_SOURCES")
    if only:
        found = [p for p in found if re.search(only, os.path.basename(p))]
    return _rel(found)


# Test-only ops (csrc/testing/*.cpp, *.cu): tests load them through
# overlap_ops/_testing.py, `import overlap_ops` never does. Built with every
# build, so `pip install ./torch_ext` is all that tests need.
TESTING = "overlap_ops._testing_C"


def _testing_extension(shipped):
    """overlap_ops._testing_C, with _C's flags and libraries. It compiles
    only csrc/testing/ and links against _C (see _linking_testing), so the
    probes call the aten/ code that ships, with its state. Files that need
    the toolkit (*CUDA.cpp, *.cu) join only a CUDA build."""
    folder = ROOT / "csrc" / "testing"
    portable = glob.glob(str(folder / "*.cpp"))
    toolkit = [p for p in portable if _needs_toolkit(p)]
    toolkit += glob.glob(str(folder / "*.cu"))
    portable = [p for p in portable if p not in toolkit]
    only = os.environ.get("OVERLAP_OPS_CUDA_SOURCES")
    if only:
        toolkit = [p for p in toolkit if re.search(only, os.path.basename(p))]
    testing = copy.deepcopy(shipped)
    testing.name = TESTING
    testing.sources = _rel(portable + (toolkit if _want_cuda() else []))
    return testing


def _extensions():
    shipped = _extension()
    return [shipped, _testing_extension(shipped)]


def _linking_testing(build_ext):
    """`build_ext` that links _testing_C against the _C built just before
    it (ext_modules order), found next to it at run time ($ORIGIN rpath)."""

    class BuildWithTesting(build_ext):
        def build_extensions(self) -> None:
            self.parallel = False  # keep that order; ninja uses MAX_JOBS
            super().build_extensions()

        def build_extension(self, ext) -> None:
            if ext.name == TESTING:
                shipped = Path(self.get_ext_fullpath("overlap_ops._C"))
                ext.library_dirs = [*ext.library_dirs, str(shipped.parent)]
                ext.extra_link_args = [
                    *ext.extra_link_args, f"-l:{shipped.name}",
                    "-Wl,-rpath,$ORIGIN"]
            super().build_extension(ext)

    return BuildWithTesting


def _wheel_cuda_dirs() -> tuple[list[str], list[str]]:
    """cuBLAS & co. headers/libs that ship with the torch CUDA wheel."""
    site = Path(torch.__file__).resolve().parent.parent / "nvidia"
    includes, libs = [], []
    for sub in ("cu13", "cu12"):
        if (site / sub / "include").is_dir():
            includes.append(str(site / sub / "include"))
            libs.append(str(site / sub / "lib"))
    for header_dir in glob.glob(str(site / "*" / "include")):
        includes.append(header_dir)
    return includes, libs


def _nvml_compat_includes(wheel_includes: list[str]) -> list[str]:
    """csrc/nvml_compat/ when no nvml.h is found: c10/cuda/driver_api.h,
    which the green-context streams use, includes it, and a toolkit installed
    without NVML's development files lacks it (see that header)."""
    home = Path(cpp_extension.CUDA_HOME)
    found = [home / "include", *home.glob("targets/*/include"),
             *map(Path, wheel_includes),
             *map(Path, filter(None, os.environ.get("CPATH", "").split(":"))),
             Path("/usr/include"), Path("/usr/local/include")]
    if any((folder / "nvml.h").is_file() for folder in found):
        return []
    return [str(ROOT / "csrc" / "nvml_compat")]


def _cublas_libraries() -> list[str]:
    """cuBLAS and cuBLASLt by soname: the wheel ships only libcublas.so.N."""
    major = torch.version.cuda.split(".")[0]
    return [f":libcublas.so.{major}", f":libcublasLt.so.{major}"]


def _cutlass_includes() -> list[str]:
    explicit = os.environ.get("CUTLASS_INCLUDE_DIR")
    if explicit:
        return [explicit]
    try:
        import cutlass_library  # from the nvidia-cutlass wheel
    except ImportError as exc:
        raise SystemExit(
            "overlap_ops: the CUDA build needs CUTLASS headers: "
            "pip install nvidia-cutlass, or set CUTLASS_INCLUDE_DIR") from exc
    src = Path(cutlass_library.__file__).resolve().parent / "source"
    return [str(src / "include"), str(src / "tools" / "util" / "include")]


def _has_gpu_kernels(ext) -> bool:
    return any(source.endswith(".cu") for source in ext.sources)


def _write_build_info(package_dir: Path, gpu_kernels: bool) -> None:
    # overlap_ops/_version.py compares this with the running torch before
    # loading _C, whose symbols only resolve in the torch it was built for.
    cuda = torch.version.cuda if gpu_kernels and not IS_HIP else None
    hip = torch.version.hip if gpu_kernels and IS_HIP else None
    package_dir.mkdir(parents=True, exist_ok=True)
    (package_dir / "_build_info.py").write_text(
        "# Written by torch_ext/setup.py: what _C was built against.\n"
        f"TORCH_VERSION = {str(torch.__version__)!r}\n"
        f"CUDA_VERSION = {cuda!r}\n"
        f"HIP_VERSION = {hip!r}\n")


class _BuildExtension(cpp_extension.BuildExtension):
    """Compiles every source in one ninja run (MAX_JOBS shared by all),
    with each CUDA file's own -gencode flags (nvcc_targets.cuda_targets):
    ninja calls nvcc through nvcc_targets.py (PYTORCH_NVCC), which appends
    them. The user's PYTORCH_NVCC (e.g. a ccache wrapper) is the compiler
    that script runs. Next to _C it writes _build_info.py."""

    def run(self) -> None:
        super().run()
        main = next(e for e in self.extensions if e.name == "overlap_ops._C")
        _write_build_info(Path(self.get_ext_fullpath(main.name)).parent,
                          _has_gpu_kernels(main))

    def build_extension(self, ext) -> None:
        if IS_HIP or not _has_gpu_kernels(ext):
            super().build_extension(ext)
            return
        saved = {name: os.environ.get(name)
                 for name in ("PYTORCH_NVCC", "OVERLAP_OPS_REAL_NVCC")}
        os.environ["OVERLAP_OPS_REAL_NVCC"] = saved["PYTORCH_NVCC"] or \
            shlex.quote(str(Path(cpp_extension.CUDA_HOME, "bin", "nvcc")))
        os.environ["PYTORCH_NVCC"] = shlex.join(
            [sys.executable, str(ROOT / "nvcc_targets.py")])
        try:
            super().build_extension(ext)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def _capabilities() -> list[tuple[int, int]]:
    # For TORCH_CUDA_ARCH_LIST=native: the visible GPUs.
    return [torch.cuda.get_device_capability(i)
            for i in range(torch.cuda.device_count())]


def _extension():
    cxx = ["-O3"]  # cpp_extension picks the C++ standard torch needs
    include_dirs = [str(ATEN)]
    cuda = _want_cuda()
    _check_build_requirements(cuda)
    if not cuda:
        print("overlap_ops: building CPU-only (no CUDA torch or no nvcc)")
        return cpp_extension.CppExtension(
            "overlap_ops._C", _cpu_sources(), include_dirs=include_dirs,
            extra_compile_args={"cxx": cxx})
    archs, origin = nvcc_targets.resolve_archs(os.environ, _capabilities)
    print(f"overlap_ops: building CPU + CUDA kernels for "
          f"{';'.join(archs)} ({origin})")
    wheel_inc, wheel_lib = _wheel_cuda_dirs()
    nvcc = ["-O3", "-DNDEBUG", "--expt-relaxed-constexpr",
            "--expt-extended-lambda", "-DOVERLAP_OPS_WITH_CUDA",
            "-DCUTLASS_ENABLE_GDC_FOR_SM90=1",
            # -gencode flags per file, added by nvcc_targets.py in its place
            nvcc_targets.arch_flag(archs)]
    return cpp_extension.CUDAExtension(
        "overlap_ops._C", _cpu_sources() + _cuda_sources(),
        include_dirs=include_dirs + wheel_inc + _cutlass_includes()
        + _nvml_compat_includes(wheel_inc),
        library_dirs=wheel_lib,
        libraries=_cublas_libraries(),
        extra_compile_args={"cxx": cxx + ["-DOVERLAP_OPS_WITH_CUDA"],
                            "nvcc": nvcc},
    )


_warn_untested_torch()
setup(
    packages=["overlap_ops"],
    ext_modules=_extensions(),
    cmdclass={"build_ext": _linking_testing(_BuildExtension).with_options(
        use_ninja=True)},
)
