"""Builds overlap_ops._C from the canonical sources in ../aten.

CPU sources always build. CUDA sources build when torch is a CUDA build and
nvcc is found (CUDA_HOME), unless OVERLAP_OPS_CUDA=0; OVERLAP_OPS_CUDA=1 makes
a missing toolkit an error instead of a silent CPU-only build.

Environment:
  OVERLAP_OPS_CUDA      auto (default) | 0 | 1
  OVERLAP_OPS_ARCHS     CUDA targets, default "90a;80" (sm_90a SASS for the
                        Hopper kernels, sm_80 SASS + compute_80 PTX for the
                        SM80 path)
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


def _gencode_flags() -> list[str]:
    """One target list for every .cu (cpp_extension has no per-file flags).

    That is safe both ways. The Hopper kernels (GroupedMMSm90_*.cu) compile
    to empty bodies below sm_90a (CUTLASS guards them with
    __CUDA_ARCH_FEAT_SM90_ALL) and dispatch only launches them on SM90. The
    SM80 kernels (GroupedMMSm80_*.cu) are deliberately built in full for
    every target, sm_90a included: the driver prefers a GPU's own SASS to
    PTX, so a stub in the sm_90a image is what an H200 would run. There the
    forced SM80 path runs sm_90a SASS of the same CUTLASS 2.x source;
    SM80 to SM89 run the sm_80 SASS, later GPUs JIT the compute_80 PTX.
    """
    flags = []
    for arch in os.environ.get("OVERLAP_OPS_ARCHS", "90a;80").split(";"):
        arch = arch.strip()
        if not arch:
            continue
        flags.append(f"-gencode=arch=compute_{arch},code=sm_{arch}")
        if arch == "80":
            # PTX too, so the SM80 path JITs on any newer GPU (H200 included).
            flags.append("-gencode=arch=compute_80,code=compute_80")
    return flags


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
            "-DCUTLASS_ENABLE_GDC_FOR_SM90=1"] + _gencode_flags()
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
    cmdclass={"build_ext": cpp_extension.BuildExtension.with_options(
        use_ninja=True)},
)
