"""Builds a patched PyTorch wheel: clone the pinned tag, apply the series, build.

Usage (through ./build.sh wheel):
  ./build.sh wheel [--pytorch-src DIR] [--backend cuda|rocm] [--dry-run]

Steps:
  1. check prerequisites (git, cmake, ninja, a C++ compiler, nvcc or hipcc,
     Python build deps, disk space) and fail early with what to install;
  2. clone the pinned tag with submodules into build/pytorch (or use
     --pytorch-src DIR, which must be at the pinned commit, clean or with
     exactly this series applied);
  3. apply patches/series with ``git am`` (one commit per patch);
  4. ROCm only: hipify the tree (tools/amd_build/build_amd.py);
  5. build with ``pip wheel`` (TORCH_CUDA_ARCH_LIST or PYTORCH_ROCM_ARCH,
     MAX_JOBS, ccache when present), printing ninja's progress, the full log
     in build/wheel-build.log; the wheel lands in dist/.

Environment: TORCH_CUDA_ARCH_LIST (default "8.0;9.0a"), PYTORCH_ROCM_ARCH
(default "gfx942"), MAX_JOBS (default: CPUs), CUDA_HOME / ROCM_PATH.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

import patch_series  # noqa: E402

# A CUDA build of PyTorch needs about this much free disk (sources,
# submodules, objects); less makes the build die hours in.
_MIN_FREE_GB = 40
_PY_MODULES = {"yaml": "pyyaml", "typing_extensions": "typing_extensions",
               "setuptools": "setuptools", "wheel": "wheel",
               "numpy": "numpy"}
_NINJA_PROGRESS = re.compile(r"^\[(\d+)/(\d+)\]")


@dataclasses.dataclass
class Plan:
    """What the build will do, checked before anything runs."""

    backend: str
    src: Path
    clone: bool
    arch_list: str
    max_jobs: int
    ccache: Optional[str]
    dist: Path
    log: Path
    problems: list[str]
    env: dict[str, str]


Which = Callable[[str], Optional[str]]


def _has_module(name: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(name) is not None


def _tool_problems(backend: str, which: Which) -> list[str]:
    problems = []
    needs = {
        "git": "apt-get install git",
        "cmake": "pip install 'cmake>=3.27'",
        "ninja": "pip install ninja",
    }
    for tool, hint in needs.items():
        if which(tool) is None:
            problems.append(f"{tool} not found on PATH: {hint}")
    if which("c++") is None and which("g++") is None and which("clang++") is None:
        problems.append("no C++ compiler (c++, g++ or clang++) on PATH: "
                        "apt-get install g++")
    if backend == "cuda" and which("nvcc") is None:
        cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
        if not Path(cuda_home, "bin", "nvcc").exists():
            problems.append("nvcc not found (PATH or $CUDA_HOME/bin): install "
                            "the CUDA toolkit and set CUDA_HOME, or pass "
                            "--backend rocm on an AMD machine")
    if backend == "rocm" and which("hipcc") is None:
        rocm = os.environ.get("ROCM_PATH", "/opt/rocm")
        if not Path(rocm, "bin", "hipcc").exists():
            problems.append("hipcc not found (PATH or $ROCM_PATH/bin): install "
                            "ROCm and set ROCM_PATH")
    return problems


def _python_problems(has_module: Callable[[str], bool]) -> list[str]:
    missing = [pkg for mod, pkg in _PY_MODULES.items() if not has_module(mod)]
    if not missing:
        return []
    return [f"python build dependencies missing: pip install {' '.join(missing)}"]


def _disk_problems(path: Path) -> list[str]:
    probe = path
    while not probe.exists():
        probe = probe.parent
    free_gb = shutil.disk_usage(probe).free / 2**30
    if free_gb < _MIN_FREE_GB:
        return [f"only {free_gb:.0f} GiB free under {probe}; a PyTorch build "
                f"needs about {_MIN_FREE_GB} GiB"]
    return []


def _max_jobs(arg: Optional[int]) -> tuple[int, list[str]]:
    """--max-jobs, else $MAX_JOBS, else the CPU count; a clear problem
    instead of a traceback when $MAX_JOBS is not a positive integer."""
    if arg is not None:
        value: object = arg
    else:
        value = os.environ.get("MAX_JOBS", str(os.cpu_count() or 1))
    try:
        jobs = int(value)  # type: ignore[arg-type]
    except ValueError:
        jobs = 0
    if jobs < 1:
        return 1, [f"MAX_JOBS must be a positive integer, got {value!r}"]
    return jobs, []


def _checkout_problems(src: Path, upstream: patch_series.Upstream
                       ) -> list[str]:
    """An existing checkout must contain the pinned commit and have its
    submodules: otherwise the build fails hours in, or at once in CMake."""
    contains = subprocess.run(
        ["git", "merge-base", "--is-ancestor", upstream.commit, "HEAD"],
        cwd=src, capture_output=True, text=True, check=False)
    if contains.returncode != 0:
        return [f"{src} does not contain the pinned {upstream.tag} "
                f"({upstream.commit[:12]}): run git -C {src} fetch --depth 1 "
                f"origin tag {upstream.tag} && git -C {src} checkout "
                f"{upstream.tag}"]
    status = subprocess.run(["git", "submodule", "status", "--recursive"],
                            cwd=src, capture_output=True, text=True,
                            check=False)
    missing = [line.split()[1] for line in status.stdout.splitlines()
               if line.startswith("-") and len(line.split()) > 1]
    if status.returncode != 0 or missing:
        shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        return [f"{src} has submodules that are not checked out "
                f"({shown or status.stderr.strip()}): run git -C {src} "
                "submodule update --init --recursive"]
    return []


def _detect_backend(which: Which) -> str:
    if which("nvcc") or Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"),
                             "bin", "nvcc").exists():
        return "cuda"
    if which("hipcc") or Path(os.environ.get("ROCM_PATH", "/opt/rocm"),
                              "bin", "hipcc").exists():
        return "rocm"
    return "cuda"


def _build_env(backend: str, arch_list: str, max_jobs: int,
               ccache: Optional[str], upstream: patch_series.Upstream
               ) -> dict[str, str]:
    env = {
        "MAX_JOBS": str(max_jobs),
        "BUILD_TEST": "0",
        "USE_CUDA": "1" if backend == "cuda" else "0",
        "USE_ROCM": "1" if backend == "rocm" else "0",
        # The local version marks the wheel as patched: 2.14.1+overlap.
        "PYTORCH_BUILD_VERSION": f"{upstream.version}+overlap",
        "PYTORCH_BUILD_NUMBER": "1",
    }
    if backend == "cuda":
        env["TORCH_CUDA_ARCH_LIST"] = arch_list
    else:
        env["PYTORCH_ROCM_ARCH"] = arch_list
    if ccache:
        for lang in ("C", "CXX", "CUDA", "HIP"):
            env[f"CMAKE_{lang}_COMPILER_LAUNCHER"] = ccache
    return env


def _arch_problems(backend: str, arch_list: str) -> list[str]:
    """The Hopper grouped-mm kernels (WGMMA, TMA) exist only in sm_90a code.
    Upstream compiles its own SM90 CUTLASS files for sm_90a per file
    (_BUILD_FOR_ADDITIONAL_ARCHS in cmake/Codegen.cmake); the series does not
    add ours there yet, so a "9.0" without "9.0a" would build kernels that
    trap on an H100/H200. Refuse that list before hours of compiling."""
    if backend != "cuda":
        return []
    archs = {a.strip().lower() for a in arch_list.replace(" ", ";").split(";")
             if a.strip()}
    has_hopper = any(a.split("+")[0] in ("9.0", "90") for a in archs)
    has_hopper_a = any(a.split("+")[0] in ("9.0a", "90a") for a in archs)
    if has_hopper and not has_hopper_a:
        return [f"TORCH_CUDA_ARCH_LIST={arch_list!r} has 9.0 but not 9.0a: "
                "the Hopper grouped-mm kernels need sm_90a code; use 9.0a "
                "instead of 9.0 (for example \"8.0;9.0a\")"]
    return []


def make_plan(args: argparse.Namespace, root: Path,
              which: Which = shutil.which,
              has_module: Callable[[str], bool] = _has_module) -> Plan:
    """Decides every step and collects every missing prerequisite."""
    upstream = patch_series.load_upstream(root)
    backend = args.backend or _detect_backend(which)
    default_arch = "8.0;9.0a" if backend == "cuda" else "gfx942"
    arch_env = "TORCH_CUDA_ARCH_LIST" if backend == "cuda" else "PYTORCH_ROCM_ARCH"
    arch_list = args.arch_list or os.environ.get(arch_env, default_arch)
    max_jobs, jobs_problems = _max_jobs(args.max_jobs)
    ccache = which("ccache")
    src = (args.pytorch_src or root / "build" / "pytorch").resolve()
    clone = args.pytorch_src is None and not (src / ".git").exists()
    problems = (_tool_problems(backend, which) + _python_problems(has_module)
                + jobs_problems + _arch_problems(backend, arch_list))
    if args.pytorch_src is not None and not src.exists():
        problems.append(f"--pytorch-src {src} does not exist: clone "
                        f"{upstream.url} at {upstream.tag} there (with "
                        "--recurse-submodules), or leave out --pytorch-src "
                        "to clone into build/pytorch")
    elif args.pytorch_src is not None and not (src / ".git").exists():
        problems.append(f"--pytorch-src {src} is not a git checkout")
    elif (src / ".git").exists() and which("git") is not None:
        problems += _checkout_problems(src, upstream)
    problems += _disk_problems(src)
    if not (root / patch_series.SERIES).exists():
        problems.append("patches/series is missing: run tools/patches/sync_patches.py")
    return Plan(backend=backend, src=src, clone=clone, arch_list=arch_list,
                max_jobs=max_jobs, ccache=ccache, dist=root / "dist",
                log=root / "build" / "wheel-build.log", problems=problems,
                env=_build_env(backend, arch_list, max_jobs, ccache, upstream))


def _series_files(root: Path) -> list[Path]:
    names = [line.strip() for line in
             (root / patch_series.SERIES).read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    return [root / "patches" / name for name in names]


def _git(args: list[str], cwd: Path, check: bool = True
         ) -> subprocess.CompletedProcess:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True,
                          text=True, check=False)
    if check and done.returncode != 0:
        raise SystemExit(f"build_wheel: git {' '.join(args)} failed in {cwd}:\n"
                         f"{done.stderr.strip()}")
    return done


def _check_remote(upstream: patch_series.Upstream) -> Optional[str]:
    """Asks the remote for the tag: network and pin in one early check."""
    try:
        done = subprocess.run(
            ["git", "ls-remote", "--tags", upstream.url,
             f"refs/tags/{upstream.tag}^{{}}", f"refs/tags/{upstream.tag}"],
            capture_output=True, text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return (f"no answer from {upstream.url} within 30 s: no network? "
                "Clone elsewhere and pass --pytorch-src DIR")
    if done.returncode != 0:
        return (f"cannot reach {upstream.url} ({done.stderr.strip()}): no "
                "network? Clone elsewhere and pass --pytorch-src DIR")
    commits = dict(reversed(line.split("\t")) for line in done.stdout.splitlines())
    commit = commits.get(f"refs/tags/{upstream.tag}^{{}}",
                         commits.get(f"refs/tags/{upstream.tag}"))
    if commit != upstream.commit:
        return (f"{upstream.tag} on {upstream.url} is {commit}, but "
                f"patches/UPSTREAM pins {upstream.commit}")
    return None


def _clone(plan: Plan, upstream: patch_series.Upstream) -> None:
    # Clone next to the target and rename when complete, so an interrupted
    # clone is never mistaken for a checkout by the next run.
    partial = plan.src.with_name(plan.src.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    plan.src.parent.mkdir(parents=True, exist_ok=True)
    print(f"==> cloning {upstream.url} {upstream.tag} with submodules "
          f"into {plan.src}", flush=True)
    cmd = ["git", "clone", "--progress", "--depth", "1", "--branch",
           upstream.tag, "--recurse-submodules", "--shallow-submodules",
           "--jobs", "8", upstream.url]
    if subprocess.run([*cmd, str(partial)], check=False).returncode != 0:
        raise SystemExit(
            f"build_wheel: cloning {upstream.url} failed (network?). Clone "
            f"it elsewhere with:\n  {' '.join(cmd)} pytorch\nthen run "
            "./build.sh wheel --pytorch-src pytorch")
    partial.rename(plan.src)


def _applied_subjects(src: Path, commit: str) -> list[str]:
    log = _git(["log", "--format=%s", "--reverse", f"{commit}..HEAD"], src)
    return [line for line in log.stdout.splitlines() if line]


def _apply_series(plan: Plan, root: Path, upstream: patch_series.Upstream
                  ) -> None:
    patches = _series_files(root)
    series = patch_series.build_series(root)
    subjects = [p.spec.subject for p in series.emitted]
    head = _git(["rev-parse", "HEAD"], plan.src).stdout.strip()
    is_base = _git(["merge-base", "--is-ancestor", upstream.commit, "HEAD"],
                   plan.src, check=False).returncode == 0
    if not is_base:
        raise SystemExit(
            f"build_wheel: {plan.src} (HEAD {head[:12]}) does not contain the "
            f"pinned {upstream.tag} {upstream.commit[:12]}: run\n  git -C "
            f"{plan.src} fetch --depth 1 origin tag {upstream.tag} && git -C "
            f"{plan.src} checkout {upstream.tag} && git -C {plan.src} "
            "submodule update --init --recursive")
    applied = _applied_subjects(plan.src, upstream.commit) if head != upstream.commit else []
    if applied == subjects:
        print(f"==> series already applied ({len(subjects)} patches)")
        return
    if applied:
        raise SystemExit(
            f"build_wheel: {plan.src} has other commits on top of "
            f"{upstream.tag}: {applied}. Reset it with\n  git -C {plan.src} "
            f"reset --hard {upstream.commit}")
    if _git(["status", "--porcelain", "--untracked-files=no"],
            plan.src).stdout.strip():
        raise SystemExit(f"build_wheel: {plan.src} has local changes; commit "
                         "or stash them first")
    print(f"==> applying {len(patches)} patch(es) with git am", flush=True)
    identity = ["-c", "user.name=overlap-ops build",
                "-c", "user.email=build@overlap-ops.invalid"]
    done = _git([*identity, "am", "--keep-cr", *map(str, patches)], plan.src,
                check=False)
    if done.returncode != 0:
        _git(["am", "--abort"], plan.src, check=False)
        raise SystemExit(
            f"build_wheel: the series does not apply to {plan.src}:\n"
            f"{done.stdout}{done.stderr}\nrun python3 tools/patches/check_patches.py "
            f"--pytorch-src {plan.src} for details")


def _stream_build(cmd: list[str], plan: Plan, env: dict[str, str],
                  cwd: Path) -> int:
    """Runs the build; shows ninja's [done/total] as a progress line."""
    plan.log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(plan.log, "w") as log, subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, bufsize=1) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            match = _NINJA_PROGRESS.match(line)
            minutes = (time.monotonic() - start) / 60
            if match:
                done, total = int(match.group(1)), int(match.group(2))
                print(f"\r    [{done}/{total}] {100 * done / total:5.1f}% "
                      f"{minutes:6.1f} min", end="", flush=True)
            elif re.search(r"\berror\b|FAILED", line):
                print(f"\n    {line.rstrip()}", flush=True)
        print()
        return proc.wait()


def _hipify(plan: Plan, env: dict[str, str]) -> None:
    print("==> ROCm: hipifying the tree (tools/amd_build/build_amd.py)",
          flush=True)
    done = subprocess.run([sys.executable, "tools/amd_build/build_amd.py"],
                          cwd=plan.src, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit("build_wheel: hipify failed; see its output above")


def _build(plan: Plan) -> list[Path]:
    env = dict(os.environ, **plan.env)
    if plan.backend == "rocm":
        _hipify(plan, env)
    plan.dist.mkdir(parents=True, exist_ok=True)
    before = set(plan.dist.glob("torch-*.whl"))
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation",
           "--no-deps", "-v", "-w", str(plan.dist), "."]
    print(f"==> building ({plan.backend}, arch {plan.arch_list}, "
          f"MAX_JOBS={plan.max_jobs}, ccache {'on' if plan.ccache else 'off'});"
          f" full log: {plan.log}", flush=True)
    if _stream_build(cmd, plan, env, plan.src) != 0:
        raise SystemExit(f"build_wheel: the build failed; see {plan.log}")
    return sorted(set(plan.dist.glob("torch-*.whl")) - before)


def _print_plan(plan: Plan, upstream: patch_series.Upstream, root: Path) -> None:
    print(f"base      {upstream.tag} {upstream.commit}")
    print(f"backend   {plan.backend} (arch {plan.arch_list})")
    print(f"source    {plan.src} ({'clone with submodules' if plan.clone else 'existing checkout'})")
    for patch in _series_files(root) if (root / patch_series.SERIES).exists() else []:
        print(f"patch     {patch.name}")
    for key, value in sorted(plan.env.items()):
        print(f"env       {key}={value}")
    print(f"output    {plan.dist}/torch-{upstream.version}+overlap-*.whl")


def _print_table(rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    print()
    for key, value in rows:
        print(f"{key.ljust(width)}  {value}")


def main(argv: Optional[list[str]] = None, root: Path = patch_series.REPO,
         which: Which = shutil.which) -> int:
    parser = argparse.ArgumentParser(description="Build a patched PyTorch wheel.")
    parser.add_argument("--pytorch-src", type=Path,
                        help="existing PyTorch checkout at the pinned tag")
    parser.add_argument("--backend", choices=("cuda", "rocm"),
                        help="default: cuda if nvcc is found, else rocm if hipcc is")
    parser.add_argument("--arch-list",
                        help="TORCH_CUDA_ARCH_LIST / PYTORCH_ROCM_ARCH value")
    parser.add_argument("--max-jobs", type=int, help="default: $MAX_JOBS or CPUs")
    parser.add_argument("--dry-run", action="store_true",
                        help="check prerequisites (incl. the remote tag) and "
                        "print the plan; build nothing")
    args = parser.parse_args(argv)
    upstream = patch_series.load_upstream(root)
    plan = make_plan(args, root, which=which)
    if plan.clone and which("git") is not None:
        remote = _check_remote(upstream)
        if remote:
            plan.problems.append(remote)
    _print_plan(plan, upstream, root)
    if plan.problems:
        print("\nbuild_wheel: cannot build, fix these first:", file=sys.stderr)
        for problem in plan.problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    if args.dry_run:
        _print_table([("prerequisites", "ok"), ("backend", plan.backend),
                      ("dry run", "nothing built")])
        return 0
    start = time.monotonic()
    if plan.clone:
        _clone(plan, upstream)
    _apply_series(plan, root, upstream)
    wheels = _build(plan)
    _print_table([("backend", plan.backend), ("arch", plan.arch_list),
                  ("minutes", f"{(time.monotonic() - start) / 60:.0f}")]
                 + [("wheel", str(w)) for w in wheels])
    return 0


if __name__ == "__main__":
    sys.exit(main())
