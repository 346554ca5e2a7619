"""Proves what can be proved here about the patch series, lists the rest.

Usage: python3 tools/patches/check_patches.py [--pytorch-src DIR] [--strict] [--root DIR]

Fails (exit 1) when:
  * a file under aten/ is in no patch, or in several (patches/files.toml);
  * a patch in the series carries no tests, or names a test file that does
    not exist;
  * a patch adds more than 4,000 lines (one patch is one upstream PR);
  * a commit message, a line a patch adds, or a PR description
    (tools/patches/export_patches.py) names this repository's extension,
    its OVERLAP_OPS_* switches or its results folder (the test files in
    TESTS_STILL_NAMING_THE_EXTENSION are only reported, for now);
  * patches/*.patch or patches/series differ from what tools/patches/sync_patches.py
    generates from aten/, test/ and patches/edits/;
  * a new aten/ file sits where upstream's CMake globs do not look, a C++
    test under aten/src/ATen/test/ is not listed by the series' hunk of
    that folder's CMakeLists.txt, or a portable native/*.cpp includes
    CUDA/HIP headers (upstream compiles native/*.cpp into the CPU library);
  * a hunk against a file the torch wheel ships (torch/include headers,
    torchgen/packaged yaml, torch/*.py) does not apply to the installed
    torch (applied in a temporary copy, never in site-packages), or a new
    header already exists there;
  * torchgen cannot parse the patched native_functions.yaml / derivatives.yaml,
    or a kernel named by a patched dispatch entry is not declared, with the
    signature torchgen generates, in an aten/ header of the series;
  * the patched host-only C++ headers the wheel ships (FunctionsManual.h)
    and the backward functions torchgen generates for the formulas the
    patched derivatives.yaml changes do not compile (g++ or $CXX
    -fsyntax-only, C++20) against the wheel's headers and aten/, with the
    at:: functions the patched yaml adds declared as torchgen generates
    them (CUDA/HIP headers are left out: they need a toolkit; no compiler
    is an error under --strict);
  * with --pytorch-src DIR: ``git apply --check`` of the whole series fails
    on that checkout.

The installed torch must be the pinned release; otherwise the wheel checks
are listed as not run (and fail under --strict, which CI=true implies).
Every hunk that could not be checked here is printed, then a summary table.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

import export_patches  # noqa: E402
import patch_series  # noqa: E402
from patch_series import BuiltPatch, FileDiff, Series  # noqa: E402

NATIVE_YAML = "aten/src/ATen/native/native_functions.yaml"
TAGS_YAML = "aten/src/ATen/native/tags.yaml"
DERIVATIVES_YAML = "tools/autograd/derivatives.yaml"

# Directories whose files upstream's aten/src/ATen/CMakeLists.txt globs
# (non-recursively) into the build, relative to aten/src/ATen.
_GLOBBED_DIRS = {
    "": (".h", ".cpp"),
    "native": (".h", ".cpp"),
    "native/cuda": (".h", ".cuh", ".cu", ".cpp"),
    "native/hip": (".h", ".cuh", ".hip", ".cpp"),
    "cuda": (".h", ".cuh", ".cu", ".cpp"),
    "cuda/detail": (".h", ".cuh", ".cu", ".cpp"),
    "hip": (".h", ".cuh", ".hip", ".cpp"),
}
# Upstream test paths whose added lines may still name the extension: the
# series' tests reach some C++ through its test-only module until they run
# on a patched torch alone. Their hits are notes, not failures; remove each
# path once it is clean (a listed path without hits fails, so the set only
# shrinks), and the check is strict for every file.
TESTS_STILL_NAMING_THE_EXTENSION: frozenset[str] = frozenset()
_MAX_LISTED_HITS = 3

_ATEN_TEST_CMAKE = "aten/src/ATen/test/CMakeLists.txt"
# A file name an added line of that CMakeLists.txt lists.
_CMAKE_LISTED = re.compile(r"^\+\s*\$\{CMAKE_CURRENT_SOURCE_DIR\}/(\S+?)\)?$",
                           re.M)
_DEVICE_INCLUDE = re.compile(
    r'^\s*#\s*include\s*[<"](cuda|cublas|cusparse|hip|rocblas|hipblas|'
    r'ATen/cuda/|ATen/hip/|ATen/native/cuda/|c10/cuda/|c10/hip/|cutlass/|cute/)',
    re.M)


@dataclasses.dataclass
class Report:
    """Results of every check, the hunks not checked, and notes."""

    rows: list[tuple[str, bool, str]] = dataclasses.field(default_factory=list)
    failures: list[str] = dataclasses.field(default_factory=list)
    unchecked: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    def result(self, name: str, errors: list[str], detail: str) -> None:
        self.rows.append((name, not errors, detail))
        self.failures.extend(f"[{name}] {e}" for e in errors)


@dataclasses.dataclass(frozen=True)
class InstalledTorch:
    """The torch found on sys.path, located without importing it."""

    site: Path
    version: str
    git_version: str


def _installed_torch() -> Optional[InstalledTorch]:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    torch_dir = Path(list(spec.submodule_search_locations)[0])
    text = (torch_dir / "version.py").read_text()
    version = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", text, re.M)
    git = re.search(r"^git_version\s*=\s*['\"]([^'\"]+)", text, re.M)
    return InstalledTorch(site=torch_dir.parent,
                          version=version.group(1) if version else "?",
                          git_version=git.group(1) if git else "?")


def wheel_file(upstream_path: str, site: Path) -> Optional[Path]:
    """Where the torch wheel ships ``upstream_path``; None if it does not."""
    rules = [
        (NATIVE_YAML, "torchgen/packaged/ATen/native/native_functions.yaml"),
        (TAGS_YAML, "torchgen/packaged/ATen/native/tags.yaml"),
        ("tools/autograd/", "torchgen/packaged/autograd/"),
        ("torchgen/", "torchgen/"),
        ("aten/src/ATen/", "torch/include/ATen/"),
        ("c10/", "torch/include/c10/"),
        ("torch/csrc/", "torch/include/torch/csrc/"),
    ]
    for prefix, target in rules:
        if upstream_path == prefix or (prefix.endswith("/")
                                       and upstream_path.startswith(prefix)):
            rel = target + upstream_path[len(prefix):]
            if target.startswith("torch/include/") and not upstream_path.endswith(
                    (".h", ".cuh", ".hpp")):
                return None
            return site / rel
    if upstream_path.startswith("torch/") and upstream_path.endswith(".py"):
        return site / upstream_path
    return None


# --- mapping, generation and placement -------------------------------------


def _check_generated(root: Path, series: Series, report: Report) -> None:
    errors = []
    wanted = patch_series.expected_outputs(series)
    on_disk = set(patch_series.generated_on_disk(root))
    fix = "run python3 tools/patches/sync_patches.py and commit patches/"
    for rel, text in wanted.items():
        path = root / rel
        if not path.exists():
            errors.append(f"{rel} is missing: {fix}")
        elif path.read_text() != text:
            errors.append(f"{rel} differs from aten/, test/ and "
                          f"patches/edits/: {fix}")
    for rel in sorted(on_disk - set(wanted)):
        errors.append(f"{rel} is not in the series any more: {fix}")
    report.result("generated patches match sources", errors,
                  f"{len(wanted) - 1} patch file(s) + series")


def _check_placement(root: Path, series: Series, report: Report) -> None:
    errors = []
    cmake_edited = any(d.path == "aten/src/ATen/CMakeLists.txt"
                       for p in series.patches for d in p.edits)
    # ATen's C++ tests are built from the names its test CMakeLists.txt
    # lists: a patch's test must be listed by it or an earlier patch.
    listed: set[str] = set()
    count = 0
    for patch in series.patches:
        for diff in patch.edits:
            if diff.path == _ATEN_TEST_CMAKE:
                listed.update(_CMAKE_LISTED.findall(diff.text))
        for diff in patch.new_files:
            if not diff.path.startswith("aten/src/ATen/"):
                continue
            count += 1
            rel = diff.path[len("aten/src/ATen/"):]
            folder, _, name = rel.rpartition("/")
            if folder == "test":
                # A header there is included by the tests, not built.
                if not name.endswith(".h") and name not in listed:
                    errors.append(
                        f"{diff.path}: {_ATEN_TEST_CMAKE} does not list it; "
                        f"add a hunk to {patch.spec.edits or 'its edits'} "
                        "that appends it to ATen_CUDA_TEST_SRCS (or "
                        "ATen_CPU_TEST_SRCS)")
                continue
            suffixes = _GLOBBED_DIRS.get(folder)
            if not cmake_edited and (suffixes is None
                                     or not name.endswith(suffixes)):
                errors.append(
                    f"{diff.path}: upstream's aten/src/ATen/CMakeLists.txt "
                    "does not glob this path; move it to native/, native/cuda/ "
                    "or cuda/, or add a CMakeLists.txt hunk")
            if folder == "native" and name.endswith(".cpp"):
                text = (root / diff.origin).read_text()
                if _DEVICE_INCLUDE.search(text):
                    errors.append(
                        f"{diff.path} includes CUDA/HIP headers but upstream "
                        "builds native/*.cpp into the CPU library: move it "
                        "to native/cuda/")
    report.result("new files where upstream builds them", errors,
                  f"{count} aten file(s)")


def _named(text: str) -> list[str]:
    """The lines of text that name what no patch may name, stripped."""
    return [line.strip() for line in text.splitlines()
            if patch_series.FORBIDDEN_NAMES.search(line)]


def _added_text(diff: FileDiff) -> str:
    return "\n".join(line[1:] for line in diff.text.splitlines()
                     if line.startswith("+") and not line.startswith("+++ "))


def _hits(where: str, lines: list[str]) -> str:
    shown = "; ".join(line if len(line) <= 100 else line[:97] + "..."
                      for line in lines[:_MAX_LISTED_HITS])
    more = len(lines) - _MAX_LISTED_HITS
    return f"{where}: {shown}" + (f" (+{more} more)" if more > 0 else "")


def _check_size_and_names(root: Path, series: Series, report: Report,
                          allowed: frozenset = TESTS_STILL_NAMING_THE_EXTENSION
                          ) -> None:
    """Each patch is one reviewable PR: at most MAX_ADDED_LINES added, and
    neither its commit message, its added lines nor its PR description
    names this repository's extension, its switches or its results folder
    (the test files in `allowed` are reported as notes)."""
    errors = []
    allowed_with_hits = set()
    limit = patch_series.MAX_ADDED_LINES
    for patch in series.emitted:
        name = patch.spec.filename
        if patch.added > limit:
            errors.append(f"{name} adds {patch.added} lines, more than "
                          f"{limit}: split it into two patches (one PR "
                          f"each) in {patch_series.MAPPING}")
        lines = _named(patch_series.commit_message(patch))
        if lines:
            errors.append(_hits(f"{name}: the commit message ({patch_series.MAPPING} "
                                "subject, motivation, test_plan) names "
                                "them", lines))
        for diff in patch.file_diffs:
            lines = _named(_added_text(diff))
            if not lines:
                continue
            where = f"{name}: {diff.path} (from {diff.origin})"
            if diff.new_file and diff.path in allowed:
                allowed_with_hits.add(diff.path)
                report.notes.append(_hits(
                    f"{where} still names the extension ({len(lines)} "
                    "line(s); allowed for now by "
                    "TESTS_STILL_NAMING_THE_EXTENSION)", lines))
            else:
                errors.append(_hits(where, lines))
        lines = _named(export_patches.pr_description(root, series, patch))
        if lines:
            errors.append(_hits(f"{name}: its PR description names them "
                                "(files.toml texts or the quoted result "
                                "files)", lines))
    for path in sorted(allowed - allowed_with_hits):
        errors.append(f"{path} no longer names the extension in any patch: "
                      "remove it from TESTS_STILL_NAMING_THE_EXTENSION in "
                      "tools/patches/check_patches.py")
    largest = max(series.emitted, key=lambda p: p.added, default=None)
    detail = (f"largest {largest.spec.filename} +{largest.added}/{limit}"
              if largest else "no patches")
    if allowed_with_hits:
        detail += (f"; {len(allowed_with_hits)} test file(s) still name the "
                   "extension (allowed for now)")
    report.result("patch size and names", errors, detail)


# --- applying hunks to the installed wheel ---------------------------------


def _run(cmd: list[str], cwd: Path,
         env: Optional[dict] = None) -> subprocess.CompletedProcess:
    env = dict(env or os.environ, GIT_CEILING_DIRECTORIES=str(cwd.parent),
               LC_ALL="C")
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True,
                          text=True, check=False)


def _apply_edits(patches: list[BuiltPatch], site: Path, tree: Path,
                 errors: list[str], checked: set[tuple[str, str]]) -> None:
    """Applies, in order, every edit whose file the wheel ships into tree."""
    for patch in patches:
        for diff in patch.edits:
            source = wheel_file(diff.path, site)
            if source is None or not source.exists():
                continue
            target = tree / diff.path
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
            diff_file = tree.parent / "one.diff"
            diff_file.write_text(diff.text)
            done = _run(["git", "apply", "--whitespace=nowarn", str(diff_file)],
                        tree)
            if done.returncode != 0:
                errors.append(
                    f"{patch.spec.filename}: {diff.path} does not apply to the "
                    f"installed {source}: {done.stderr.strip()}")
            else:
                checked.update((patch.spec.filename, diff.path + h.header)
                               for h in diff.hunks)
            if diff.path.endswith(".py"):
                _compile_python(target, patch, errors)


def _compile_python(path: Path, patch: BuiltPatch, errors: list[str]) -> None:
    try:
        compile(path.read_text(), str(path), "exec")
    except SyntaxError as exc:
        errors.append(f"{patch.spec.filename}: patched {path.name} does not "
                      f"compile: {exc}")


def _list_unchecked(series: Series, site: Optional[Path],
                    checked: set[tuple[str, str]], report: Report) -> None:
    for patch in series.patches:
        tag = " (pending)" if patch.pending else ""
        for diff in patch.edits:
            where = wheel_file(diff.path, site) if site else None
            if where is None:
                reason = "file not shipped in the torch wheel"
            elif not where.exists():
                reason = f"wheel has no {where.name}"
            else:
                reason = "wheel checks not run"
            for hunk in diff.hunks:
                if (patch.spec.filename, diff.path + hunk.header) not in checked:
                    report.unchecked.append(
                        f"{patch.spec.filename}{tag}: {diff.path} "
                        f"{hunk.header}: {reason}")


def _check_new_files_absent(series: Series, site: Path, report: Report) -> None:
    errors = []
    unverifiable = []
    for patch in series.patches:
        for diff in patch.new_files:
            where = wheel_file(diff.path, site)
            if where is None:
                unverifiable.append(diff.path)
            elif where.exists():
                errors.append(f"{patch.spec.filename}: new file {diff.path} "
                              f"already exists upstream ({where})")
    if unverifiable:
        report.unchecked.append(
            f"new-file hunks for {len(unverifiable)} file(s) the wheel does "
            "not ship (sources, tests): that upstream lacks them is not "
            "checkable here: " + ", ".join(unverifiable))
    report.result("new headers absent upstream", errors,
                  "checked against torch/include")


# --- torchgen ---------------------------------------------------------------


def _normalise_type(param: str) -> str:
    param = param.split("=")[0].strip()
    param = re.sub(r"(?<![\w:])::", "", param)  # leading global qualifier
    param = re.sub(r"\s*([&*<>,]|::)\s*", r"\1", param)
    param = re.sub(r"\b(at|c10)::", "", param)
    param = re.sub(r"^(const\s+)?(.*?)\s*\b[A-Za-z_]\w*$", r"\1\2", param)
    return re.sub(r"\s+", " ", param).strip()


def _split_params(text: str) -> list[str]:
    params, depth, current = [], 0, ""
    for char in text:
        depth += char in "<({"
        depth -= char in ">)}"
        if char == "," and depth == 0:
            params.append(current)
            current = ""
        else:
            current += char
    return [p for p in (params + [current]) if p.strip()]


def _signature(decl: str, name: str) -> Optional[list[str]]:
    match = re.search(rf"\b{re.escape(name)}\s*\(", decl)
    if not match:
        return None
    depth, start = 1, match.end()
    for pos in range(start, len(decl)):
        depth += decl[pos] == "("
        depth -= decl[pos] == ")"
        if depth == 0:
            return [_normalise_type(p) for p in _split_params(decl[start:pos])]
    return None


def _aten_declarations(root: Path, name: str) -> list[tuple[str, list[str]]]:
    found = []
    for header in sorted((root / "aten").rglob("*.h")):
        text = header.read_text()
        text = re.sub(r"//[^\n]*", "", text)
        for match in re.finditer(rf"\b{re.escape(name)}\s*\(", text):
            line_start = text.rfind(";", 0, match.start())
            line_start = max(line_start, text.rfind("}", 0, match.start()),
                             text.rfind("{", 0, match.start()))
            sig = _signature(text[line_start + 1:], name)
            if sig is not None:
                found.append((header.relative_to(root).as_posix(), sig))
    return found


def _dispatch_table(parsed) -> dict[str, dict[str, str]]:
    table: dict[str, dict[str, str]] = {}
    for f in parsed.native_functions:
        kernels = {}
        for key, index in parsed.backend_indices.items():
            meta = index.get_kernel(f)
            if meta is not None:
                kernels[str(key)] = meta.kernel
        table[str(f.func)] = kernels
    return table


def _added_function_decls(parsed, base_names: set[str]) -> list[str]:
    """at:: declarations, as torchgen generates them, of the functions the
    patched native_functions.yaml adds (Functions.h in a real build)."""
    from torchgen.api.types import CppSignatureGroup

    return [CppSignatureGroup.from_native_function(f, method=False)
            .signature.decl() + ";"
            for f in parsed.native_functions
            if str(f.func.name) not in base_names]


def _host_headers(tree: Path) -> list[str]:
    """#include spellings of the patched headers that need no toolkit."""
    spelled = []
    for path in sorted(tree.rglob("*.h")):
        rel = path.relative_to(tree).as_posix()
        if "/cuda/" in rel or "/hip/" in rel:
            continue
        spelled.append(rel.removeprefix("aten/src/"))
    return spelled


def _changed_autograd_nodes(tree: Path, site: Path, native_yaml: Path,
                            tags: Path, out: Path) -> dict[str, str]:
    """The generated backward functions (name -> C++ text) of the ops whose
    formulas the patched derivatives.yaml changes, generated by torchgen as
    a PyTorch build would (Functions.cpp's preamble under "")."""
    derivatives = tree / DERIVATIVES_YAML
    if not derivatives.exists():
        return {}
    from torchgen.packaged.autograd.gen_autograd_functions import (
        gen_autograd_functions_lib)
    from torchgen.packaged.autograd.load_derivatives import load_derivatives

    packaged = site / "torchgen/packaged"
    base, _ = load_derivatives(str(packaged / "autograd/derivatives.yaml"),
                               str(packaged / "ATen/native/native_functions.yaml"),
                               str(tags))
    infos, _ = load_derivatives(str(derivatives), str(native_yaml), str(tags))

    def formulas(table) -> dict[str, list[str]]:
        return {str(schema): [d.formula for info in by_key.values()
                              for d in info.derivatives]
                for schema, by_key in table.items()}

    before, after = formulas(base), formulas(infos)
    changed = [info.op for schema, by_key in infos.items()
               if after[str(schema)] != before.get(str(schema))
               for info in by_key.values() if info.op]
    if not changed:
        return {}
    out.mkdir(parents=True, exist_ok=True)
    gen_autograd_functions_lib(str(out), infos,
                               str(packaged / "autograd/templates"))
    source = (out / "Functions.cpp").read_text()
    opening = "namespace torch::autograd::generated {"
    nodes = {"": source[:source.index(opening) + len(opening)]}
    for op in changed:
        found = re.search(rf"^static variable_list {op}_apply_functional\(.*?^}}\n",
                          source, re.S | re.M)
        if found:
            nodes[op] = found.group(0)
    return nodes


def _check_patched_cpp(tree: Path, site: Path, root: Path, label: str,
                       added_decls: list[str], native_yaml: Path, tags: Path,
                       strict: bool, report: Report) -> None:
    """Compiles what a build would compile of the patched upstream C++ that
    the wheel ships: the host headers, and the generated backward functions
    of the ops whose derivatives.yaml formulas changed (so each formula's
    call is checked against the function it names)."""
    name = f"patched headers + autograd nodes compile ({label})"
    headers = _host_headers(tree)
    try:
        nodes = _changed_autograd_nodes(tree, site, native_yaml, tags,
                                        tree.parent / "generated")
    except Exception as exc:  # torchgen raises plain assertions and errors
        report.result(name, [f"generating the autograd nodes: {exc}"], "")
        return
    if not headers and not nodes:
        return
    compiler = shlex.split(os.environ.get("CXX", "")) or [
        c for c in (shutil.which("g++") or shutil.which("c++"),) if c]
    if not compiler:
        problem = f"{name}: not run, no C++ compiler (g++ or $CXX) found"
        if strict:
            report.result(name, [problem], "")
        else:
            report.notes.append(problem)
        return
    unit = tree.parent / "patched_cpp.cpp"
    unit.write_text(
        "#include <ATen/ATen.h>\n"
        "namespace at {\n" + "\n".join(added_decls) + "\n}  // namespace at\n"
        + "".join(f"#include <{h}>\n" for h in headers)
        + (nodes.get("", "") + "\n"
           + "\n".join(text for op, text in nodes.items() if op)
           + "\n}  // namespace torch::autograd::generated\n" if nodes else ""))
    # The patched copies first, then the series' own headers, then the wheel
    # (compiled_autograd.h, which the generated nodes include, needs Python's).
    includes = [tree, tree / "aten/src", root / "aten/src", site / "torch/include",
                site / "torch/include/torch/csrc/api/include",
                Path(sysconfig.get_paths()["include"])]
    try:
        done = _run([*compiler, "-std=c++20", "-fsyntax-only",
                     *(f"-I{d}" for d in includes), str(unit)], tree.parent)
    except OSError as exc:
        report.result(name, [f"{' '.join(compiler)}: {exc}"], "")
        return
    errors = [] if done.returncode == 0 else [
        f"{' '.join(compiler)} -fsyntax-only: " + done.stderr.strip()[-2000:]]
    report.result(name, errors, ", ".join(
        headers + [f"{op} (generated)" for op in nodes if op]))


def _check_torchgen(tree: Path, site: Path, root: Path, label: str,
                    require_decls: bool, report: Report,
                    compile_headers: bool = True, strict: bool = False) -> None:
    from torchgen.dest.native_functions import (
        compute_native_function_declaration)
    from torchgen.gen import parse_native_yaml

    errors: list[str] = []
    details = []
    base_yaml = site / "torchgen/packaged/ATen/native/native_functions.yaml"
    tags = site / "torchgen/packaged/ATen/native/tags.yaml"
    new_yaml = tree / NATIVE_YAML
    if not new_yaml.exists():
        _check_derivatives(tree, base_yaml, tags, errors, details)
        report.result(f"torchgen ({label})", errors,
                      "; ".join(details) or "no yaml patched")
        if compile_headers:
            _check_patched_cpp(tree, site, root, label, [], base_yaml, tags,
                               strict, report)
        return
    try:
        base_parsed = parse_native_yaml(str(base_yaml), str(tags))
        before = _dispatch_table(base_parsed)
        parsed = parse_native_yaml(str(new_yaml), str(tags))
    except Exception as exc:  # torchgen raises plain assertions and errors
        report.result(f"torchgen ({label})", [f"parse_native_yaml: {exc}"], "")
        return
    after = _dispatch_table(parsed)
    changed = [op for op, kernels in after.items() if before.get(op) != kernels]
    for f in parsed.native_functions:
        if str(f.func) not in changed:
            continue
        for key, index in parsed.backend_indices.items():
            meta = index.get_kernel(f)
            if meta is None or meta.kernel == before.get(str(f.func), {}).get(str(key)):
                continue
            decl = "\n".join(compute_native_function_declaration(f, index))
            details.append(f"{f.func.name} {key}: {meta.kernel}")
            _match_declaration(root, meta.kernel, decl, require_decls,
                               errors, report)
    _check_derivatives(tree, new_yaml, tags, errors, details)
    report.result(f"torchgen ({label})", errors,
                  "; ".join(details) or "no dispatch changes")
    if compile_headers:
        base_names = {str(f.func.name) for f in base_parsed.native_functions}
        _check_patched_cpp(tree, site, root, label,
                           _added_function_decls(parsed, base_names), new_yaml,
                           tags, strict, report)


def _match_declaration(root: Path, kernel: str, decl: str, required: bool,
                       errors: list[str], report: Report) -> None:
    expected = _signature(decl, kernel)
    found = _aten_declarations(root, kernel)
    if not found:
        message = (f"{kernel} is not declared in any aten/ header; torchgen "
                   f"declares: {decl}")
        (errors if required else report.notes).append(message)
        return
    if not any(sig == expected for _, sig in found):
        where = ", ".join(f"{path}: ({', '.join(sig)})" for path, sig in found)
        errors.append(f"{kernel}: aten declares {where} but torchgen declares "
                      f"({', '.join(expected or [])})")


def _check_derivatives(tree: Path, native_yaml: Path, tags: Path,
                       errors: list[str], details: list[str]) -> None:
    derivatives = tree / DERIVATIVES_YAML
    if not derivatives.exists():
        return
    from torchgen.packaged.autograd.load_derivatives import load_derivatives

    try:
        infos, _ = load_derivatives(str(derivatives), str(native_yaml), str(tags))
    except Exception as exc:
        errors.append(f"load_derivatives: {exc}")
        return
    for schema, by_key in infos.items():
        if str(schema.name) != "_grouped_mm":
            continue
        for info in by_key.values():
            for derivative in info.derivatives:
                details.append(f"d/d{','.join(derivative.var_names)}: "
                               f"{derivative.formula[:60]}")


# --- a real checkout ---------------------------------------------------------


def _check_pytorch_src(src: Path, root: Path, series: Series,
                       report: Report) -> None:
    errors = []
    if not src.is_dir():
        report.result("git apply --check on checkout",
                      [f"--pytorch-src {src} does not exist"], "")
        return
    head = _run(["git", "rev-parse", "HEAD"], src)
    if head.returncode != 0:
        report.result("git apply --check on checkout",
                      [f"{src} is not a git checkout: {head.stderr.strip()}"], "")
        return
    if head.stdout.strip() != series.upstream.commit:
        report.notes.append(
            f"{src} is at {head.stdout.strip()[:12]}, not the pinned "
            f"{series.upstream.tag} ({series.upstream.commit[:12]})")
    patches = [str(root / "patches" / p.spec.filename) for p in series.emitted]
    # Later patches carry earlier ones' lines as context, so apply them in
    # order to a scratch index (`git apply --check` of several patches checks
    # each against HEAD alone). The checkout itself is never touched.
    with tempfile.TemporaryDirectory(prefix="check_patches.") as tmp:
        env = dict(os.environ, GIT_INDEX_FILE=str(Path(tmp) / "index"))
        _run(["git", "read-tree", "HEAD"], src, env=env)
        for patch in patches:
            done = _run(["git", "apply", "--cached", patch], src, env=env)
            if done.returncode != 0:
                errors.append(f"{Path(patch).name} does not apply to {src} "
                              f"after the patches before it: "
                              f"{done.stderr.strip()}")
                break
    report.result("git apply --check on checkout", errors,
                  f"{len(patches)} patch(es) on {src}")


# --- driver -------------------------------------------------------------------


def _pin_ok(series: Series, torch: Optional[InstalledTorch], strict: bool,
            report: Report) -> bool:
    pin = series.upstream
    if torch is None:
        problem = "torch is not installed"
    elif torch.version.split("+")[0] != pin.version:
        problem = f"installed torch is {torch.version}, not {pin.version}"
    elif torch.git_version not in ("?", "Unknown") and torch.git_version != pin.commit:
        problem = (f"installed torch {torch.version} was built from "
                   f"{torch.git_version[:12]}, not {pin.commit[:12]}")
    else:
        report.result("installed torch is the pin", [],
                      f"{torch.version} @ {torch.git_version[:12]}")
        return True
    errors = [problem + f": pip install torch=={pin.version}"] if strict else []
    if not strict:
        report.notes.append(problem + ": wheel checks skipped (--strict or "
                            "CI=true makes this an error)")
    report.result("installed torch is the pin", errors, problem)
    return False


def _wheel_checks(series: Series, root: Path, torch: InstalledTorch,
                  report: Report, strict: bool = False) -> set[tuple[str, str]]:
    checked: set[tuple[str, str]] = set()
    passes = [("series", series.emitted, True),
              ("series + pending", series.patches, False)]
    # The headers compile once when no patch is pending (the trees match).
    pending = len(series.patches) != len(series.emitted)
    with tempfile.TemporaryDirectory(prefix="check_patches.") as tmp:
        for label, patches, required in passes:
            tree = Path(tmp, label.replace(" ", "_").replace("+", "p"), "tree")
            tree.mkdir(parents=True)
            errors: list[str] = []
            _apply_edits(patches, torch.site, tree, errors, checked)
            report.result(f"hunks apply to torch {torch.version} ({label})",
                          errors, f"{len(patches)} patch(es)")
            if not errors:
                _check_torchgen(tree, torch.site, root, label, required, report,
                                compile_headers=required or pending,
                                strict=strict)
    _check_new_files_absent(series, torch.site, report)
    return checked


def run_checks(root: Path, pytorch_src: Optional[Path], strict: bool) -> Report:
    """Runs every check; the report says what failed and what was not run."""
    report = Report()
    try:
        series = patch_series.build_series(root)
    except (OSError, ValueError, KeyError) as exc:
        report.result("patches/files.toml and patches/UPSTREAM", [str(exc)], "")
        return report
    report.result("aten/ files in one patch each, tests", series.problems,
                  f"{sum(len(p.new_files) for p in series.patches)} new file(s)")
    report.notes.extend(series.notes)
    for patch in series.patches:
        if patch.pending:
            report.notes.append(f"{patch.spec.filename} is pending: {patch.pending}")
    _check_generated(root, series, report)
    _check_placement(root, series, report)
    _check_size_and_names(root, series, report)
    torch = _installed_torch()
    # Hunks against files an earlier patch adds were proved when the series
    # was built (taken back out of aten/ exactly).
    checked: set[tuple[str, str]] = set(series.series_hunks)
    if _pin_ok(series, torch, strict, report):
        checked |= _wheel_checks(series, root, torch, report, strict)
    if pytorch_src is not None:
        _check_pytorch_src(pytorch_src, root, series, report)
        ok = report.rows[-1][1]
        if ok:
            checked.update((p.spec.filename, d.path + h.header)
                           for p in series.emitted for d in p.edits
                           for h in d.hunks)
    _list_unchecked(series, torch.site if torch else None, checked, report)
    return report


def _print_report(report: Report, seconds: float) -> None:
    for note in report.notes:
        print(f"note: {note}")
    print(f"\nHunks not checked here ({len(report.unchecked)}):")
    for line in report.unchecked or ["(none)"]:
        print(f"  - {line}")
    for failure in report.failures:
        print(f"FAIL {failure}", file=sys.stderr)
    width = max(len(name) for name, _, _ in report.rows)
    print(f"\n{'check'.ljust(width)}  result  detail")
    for name, ok, detail in report.rows:
        print(f"{name.ljust(width)}  {'ok  ' if ok else 'FAIL'}    {detail}")
    verdict = "FAILED" if report.failures else "passed"
    print(f"check_patches: {verdict} in {seconds:.1f} s, "
          f"{len(report.unchecked)} hunk line(s) not checkable here")


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description="Checks patches/ against aten/, the installed torch wheel "
        "and optionally a PyTorch checkout.")
    parser.add_argument("--pytorch-src", type=Path,
                        help="PyTorch checkout at the pinned tag: "
                        "git apply --check the whole series there")
    parser.add_argument("--strict", action="store_true",
                        default=os.environ.get("CI", "").lower() in ("1", "true"),
                        help="fail when the installed torch is not the pin "
                        "(default on when CI=true)")
    parser.add_argument("--root", type=Path, default=patch_series.REPO,
                        help="repository root (default: this checkout)")
    args = parser.parse_args(argv)
    start = time.monotonic()
    report = run_checks(args.root.resolve(), args.pytorch_src, args.strict)
    _print_report(report, time.monotonic() - start)
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
