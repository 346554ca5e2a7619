"""The package version (its one source: pyproject.toml reads it) and the
check that the compiled extension belongs to the running torch."""

from __future__ import annotations

from typing import Optional

__version__ = "0.1.0"

_REBUILD = ("Rebuild it against this torch: `pip install "
            "--no-build-isolation ./torch_ext` (or `./build.sh`) in the "
            "overlap_ops repository.")


def _minor(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:2])


def _major(version: Optional[str]) -> Optional[str]:
    return version.split(".")[0] if version else None


def _check_versions(
    built_torch: str,
    built_cuda: Optional[str],
    torch_version: str,
    torch_cuda: Optional[str],
) -> None:
    """Raises ImportError when an extension built against torch
    `built_torch` (CUDA kernels for `built_cuda`, None without them) cannot
    load into torch `torch_version` (CUDA `torch_cuda`): C++ extensions only
    load into the torch minor release they were compiled against, and CUDA
    kernels need the CUDA major release they link."""
    if _minor(built_torch) != _minor(torch_version):
        raise ImportError(
            f"overlap_ops was built against torch {built_torch}, but this "
            f"is torch {torch_version}: its C++ extension loads only into "
            f"the torch minor release it was built against. {_REBUILD}")
    if built_cuda and _major(built_cuda) != _major(torch_cuda):
        running = f"CUDA {torch_cuda}" if torch_cuda else "no CUDA"
        raise ImportError(
            f"overlap_ops's CUDA kernels were built against CUDA "
            f"{built_cuda}, but this torch ({torch_version}) has {running}. "
            f"{_REBUILD}")


def check_build() -> None:
    """Runs _check_versions on what setup.py recorded, before _C loads (a
    mismatched _C would fail on an unresolved C++ symbol instead)."""
    import torch

    try:
        from overlap_ops import _build_info
    except ImportError:  # a _C not built by torch_ext/setup.py: no record
        return
    _check_versions(_build_info.TORCH_VERSION, _build_info.CUDA_VERSION,
                    str(torch.__version__), torch.version.cuda)
