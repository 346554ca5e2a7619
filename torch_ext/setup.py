"""Builds overlap_ops._C from the canonical sources in ../aten.

CPU sources always build. CUDA sources build when torch is a CUDA build and
nvcc is found (CUDA_HOME), unless OVERLAP_OPS_CUDA=0; OVERLAP_OPS_CUDA=1 makes
a missing toolkit an error instead of a silent CPU-only build.

Environment:
  OVERLAP_OPS_CUDA      auto (default) | 0 | 1
  OVERLAP_OPS_ARCHS     CUDA targets, default "90a;80": sm_90a SASS for the
                        Hopper kernels, sm_80 SASS + compute_80 PTX for the
                        SM80 kernels (JIT-compiled on Hopper), both for the
                        rest; see _cuda_targets
  CUTLASS_INCLUDE_DIR   CUTLASS headers; default: the nvidia-cutlass wheel
  MAX_JOBS              parallel compile jobs (ninja)
  OVERLAP_OPS_CUDA_SOURCES  regex on file names: compile only those CUDA
                        sources (compile checks; the result is not loadable)
"""

from __future__ import annotations

import glob
import os
import re
import sys
from pathlib import Path

from setuptools import setup

import torch
from torch.utils import cpp_extension

ROOT = Path(__file__).resolve().parent
REPO = ROOT.parent
ATEN = REPO / "aten" / "src"

SUPPORTED_TORCH = ((2, 11), (2, 14))


def _torch_minor() -> tuple[int, int]:
    major, minor = torch.__version__.split(".")[:2]
    return int(major), int(minor)


def _warn_unsupported_torch() -> None:
    low, high = SUPPORTED_TORCH
    if not low <= _torch_minor() <= high:
        print(
            f"overlap_ops: warning: torch {torch.__version__} is outside the "
            f"supported range {low[0]}.{low[1]} to {high[0]}.{high[1]}",
            file=sys.stderr,
        )


def _want_cuda() -> bool:
    mode = os.environ.get("OVERLAP_OPS_CUDA", "auto").lower()
    have_nvcc = cpp_extension.CUDA_HOME is not None and Path(
        cpp_extension.CUDA_HOME, "bin", "nvcc").exists()
    have = torch.version.cuda is not None and have_nvcc
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


def _cpu_sources() -> list[str]:
    found = glob.glob(str(ATEN / "ATen" / "**" / "*.cpp"), recursive=True)
    shim = glob.glob(str(ROOT / "csrc" / "*.cpp"))
    return _rel([p for p in found if not _needs_toolkit(p)] + shim)


def _cuda_sources() -> list[str]:
    found = glob.glob(str(ATEN / "ATen" / "**" / "*.cpp"), recursive=True)
    found = [p for p in found if _needs_toolkit(p) and not p.endswith("HIP.cpp")]
    found += glob.glob(str(ATEN / "ATen" / "**" / "*.cu"), recursive=True)
    # Compile checks (tools/check_cuda_compile.sh) build a subset.
    only = os.environ.get("OVERLAP_OPS_CUDA_SOURCES")
    if only:
        found = [p for p in found if re.search(only, os.path.basename(p))]
    return _rel(found)


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


_PTX_80 = "-gencode=arch=compute_80,code=compute_80"


def _archs() -> list[str]:
    archs = os.environ.get("OVERLAP_OPS_ARCHS", "90a;80").split(";")
    return [arch.strip() for arch in archs if arch.strip()]


def _sass(archs: list[str]) -> list[str]:
    return [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]


def _cuda_targets(source: str) -> tuple[str, list[str]]:
    """(object subfolder, nvcc -gencode flags) for one source file.

    - GroupedMMSm90_*.cu (CUTLASS 3.x, WGMMA/TMA): Hopper targets only. They
      compile to empty bodies anywhere else, and only SM90 launches them.
    - GroupedMMSm80_*.cu (CUTLASS 2.x, mma.sync): SASS for every target but
      Hopper, plus compute_80 PTX. Without Hopper SASS in their image, an
      H200 runs these kernels from the PTX through the driver's JIT, as a
      GPU newer than every SASS target (SM120 without sm_120) does; the
      forced SM80 path on the H200 therefore tests that PTX. The TF32 one
      (GroupedMMSm80_tf32.cu) also gets Hopper SASS: Hopper runs it by
      default for some float32 calls (GroupedMMTf32Route.h), so no JIT.
    - everything else: every target, plus compute_80 PTX when 80 is listed.
    """
    archs = _archs()
    name = os.path.basename(source)
    if name.startswith("GroupedMMSm90_"):
        return "sm90", _sass([a for a in archs if a.startswith("9")] or archs)
    if name == "GroupedMMSm80_tf32.cu":
        return "sm80_tf32", _sass(archs) + [_PTX_80]
    if name.startswith("GroupedMMSm80_"):
        return "sm80", _sass([a for a in archs if not a.startswith("9")]) + [
            _PTX_80]
    return "", _sass(archs) + ([_PTX_80] if "80" in archs else [])


class _BuildExtension(cpp_extension.BuildExtension):
    """cpp_extension passes one nvcc flag list to every .cu file. This runs
    its ninja compile once per target group of _cuda_targets, each group in
    its own object folder (and so its own build.ninja), with that group's
    -gencode flags appended."""

    def build_extension(self, ext) -> None:
        compile_all = self.compiler.compile

        def compile_by_targets(sources, output_dir=None, *args,
                               extra_postargs=None, **kwargs):
            groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
            for source in sources:
                folder, flags = _cuda_targets(source)
                groups.setdefault((folder, tuple(flags)), []).append(source)
            objects = {}
            for (folder, flags), group in sorted(groups.items()):
                post = dict(extra_postargs)
                post["nvcc"] = list(post["nvcc"]) + list(flags)
                built = compile_all(
                    group, os.path.join(output_dir, folder), *args,
                    extra_postargs=post, **kwargs)
                objects.update(zip(group, built))
            return [objects[source] for source in sources]

        if any(source.endswith(".cu") for source in ext.sources):
            self.compiler.compile = compile_by_targets
        try:
            super().build_extension(ext)
        finally:
            self.compiler.compile = compile_all


def _extension():
    cxx = ["-O3"]  # cpp_extension picks the C++ standard torch needs
    include_dirs = [str(ATEN)]
    if not _want_cuda():
        print("overlap_ops: building CPU-only (no CUDA torch or no nvcc)")
        return cpp_extension.CppExtension(
            "overlap_ops._C", _cpu_sources(), include_dirs=include_dirs,
            extra_compile_args={"cxx": cxx})
    print("overlap_ops: building CPU + CUDA kernels")
    wheel_inc, wheel_lib = _wheel_cuda_dirs()
    nvcc = ["-O3", "-DNDEBUG", "--expt-relaxed-constexpr",
            "--expt-extended-lambda", "-DOVERLAP_OPS_WITH_CUDA",
            "-DCUTLASS_ENABLE_GDC_FOR_SM90=1"]  # + _cuda_targets per file
    return cpp_extension.CUDAExtension(
        "overlap_ops._C", _cpu_sources() + _cuda_sources(),
        include_dirs=include_dirs + wheel_inc + _cutlass_includes(),
        library_dirs=wheel_lib,
        libraries=_cublas_libraries(),
        extra_compile_args={"cxx": cxx + ["-DOVERLAP_OPS_WITH_CUDA"],
                            "nvcc": nvcc},
    )


_warn_unsupported_torch()
setup(
    packages=["overlap_ops"],
    ext_modules=[_extension()],
    cmdclass={"build_ext": _BuildExtension.with_options(use_ninja=True)},
)
