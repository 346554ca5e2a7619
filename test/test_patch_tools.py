# Owner(s): ["module: tooling"]
"""CPU tests of the patch tooling: sync, check, build_wheel plan, export."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import unittest.mock
from pathlib import Path

from torch.testing._internal.common_utils import run_tests, TestCase

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools" / "patches"))

import build_wheel  # noqa: E402
import check_patches  # noqa: E402
import export_patches  # noqa: E402
import patch_series  # noqa: E402
import sync_patches  # noqa: E402

_TORCH = check_patches._installed_torch()
_PIN = patch_series.load_upstream(REPO)
_HAVE_PINNED_TORCH = (_TORCH is not None
                      and _TORCH.version.split("+")[0] == _PIN.version)
_GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


def _copy_repo(dest: Path) -> Path:
    """The parts of this repository the tools read, copied into dest."""
    for name in ("aten", "patches", "test", "tools"):
        shutil.copytree(REPO / name, dest / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return dest


class TestPatchTools(TestCase):
    def setUp(self) -> None:
        super().setUp()
        self._tmp = tempfile.TemporaryDirectory(prefix="patch_tools.")
        self.root = _copy_repo(Path(self._tmp.name) / "repo")

    def tearDown(self) -> None:
        self._tmp.cleanup()
        super().tearDown()

    def _generated_errors(self) -> list[str]:
        report = check_patches.Report()
        series = patch_series.build_series(self.root)
        check_patches._check_generated(self.root, series, report)
        return report.failures

    def test_committed_patches_match_aten(self) -> None:
        self.assertEqual(self._generated_errors(), [])

    def test_mutated_aten_file_fails(self) -> None:
        path = self.root / "aten/src/ATen/native/GroupedMM.cpp"
        path.write_text(path.read_text() + "// drift\n")
        errors = self._generated_errors()
        self.assertTrue(errors)
        self.assertIn("tools/patches/sync_patches.py", errors[0])
        sync_patches.sync(self.root)
        self.assertEqual(self._generated_errors(), [])

    def test_unmapped_aten_file_fails(self) -> None:
        extra = self.root / "aten/src/ATen/native/cuda/Unknown.cu"
        extra.parent.mkdir(parents=True, exist_ok=True)
        extra.write_text("// new kernel\n")
        problems = patch_series.build_series(self.root).problems
        self.assertEqual(len(problems), 1)
        self.assertIn("aten/src/ATen/native/cuda/Unknown.cu is in no patch", problems[0])
        self.assertIn("patches/files.toml", problems[0])
        with self.assertRaisesRegex(SystemExit, "files.toml"):
            sync_patches.sync(self.root)

    def test_every_patch_carries_existing_tests(self) -> None:
        self.assertEqual(patch_series.build_series(self.root).problems, [])
        (self.root / "test/test_grouped_mm_cuda.py").unlink()
        problems = patch_series.build_series(self.root).problems
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("0004-grouped-mm-device-offsets-cuda.patch: test "
                      "file(s) test/test_grouped_mm_cuda.py", problems[0])
        mapping = self.root / patch_series.MAPPING
        mapping.write_text(mapping.read_text().replace(
            'tests = ["test/test_grouped_mm_cuda.py"]', "tests = []"))
        problems = patch_series.build_series(self.root).problems
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("carries no tests", problems[0])

    def _size_and_names(self, **kwargs) -> check_patches.Report:
        report = check_patches.Report()
        series = patch_series.build_series(self.root)
        self.assertEqual(series.problems, [])
        check_patches._check_size_and_names(self.root, series, report,
                                            **kwargs)
        return report

    def test_patch_over_the_size_limit_fails(self) -> None:
        self.assertEqual(self._size_and_names().failures, [])
        path = self.root / "aten/src/ATen/native/GroupedMMValidation.cpp"
        path.write_text(path.read_text() + "// padding\n" * 4000)
        failures = self._size_and_names().failures
        self.assertEqual(len(failures), 1, failures)
        self.assertIn("0003-grouped-mm-validation-cpu.patch adds", failures[0])
        self.assertIn("more than 4000", failures[0])

    def test_extension_names_fail_in_messages_and_aten(self) -> None:
        mapping = self.root / patch_series.MAPPING
        text = mapping.read_text()
        mapping.write_text(text.replace(
            "cuda_cu_mask_test (C++, no GPU needed;",
            "cuda_cu_mask_test (C++, with overlap_ops, no GPU needed;", 1))
        header = self.root / "aten/src/ATen/native/GroupedMM.h"
        header.write_text(header.read_text()
                          + "// measured: results/grouped_mm/x.md\n")
        edit = self.root / "patches/edits/0003-grouped-mm-validation-cpu.diff"
        edit.write_text(edit.read_text().replace(
            "+    CPU: grouped_mm_cpu", "+    CPU: grouped_mm_cpu  # OVERLAP_OPS_X"))
        failures = self._size_and_names().failures
        joined = "\n".join(failures)
        self.assertIn("0002-rocm-cu-mask.patch: the commit message", joined)
        self.assertIn("aten/src/ATen/native/GroupedMM.h", joined)
        self.assertIn("results/grouped_mm/x.md", joined)
        self.assertIn("patches/edits/0003-grouped-mm-validation-cpu.diff",
                      joined)
        # The PR descriptions repeat the commit message.
        self.assertIn("0002-rocm-cu-mask.patch: its PR description", joined)
        self.assertEqual(len(failures), 4, failures)

    def test_extension_names_in_tests_allowed_only_while_listed(self) -> None:
        # The list as committed passes; a test file joins it only by name.
        listed = check_patches.TESTS_STILL_NAMING_THE_EXTENSION
        self.assertEqual(self._size_and_names().failures, [])
        path = "test/grouped_mm_reference.py"
        self.assertNotIn(path, listed)
        test_file = self.root / path
        clean = test_file.read_text()
        test_file.write_text(clean + "# import overlap_ops\n")
        failures = self._size_and_names().failures
        self.assertEqual(len(failures), 1, failures)
        self.assertIn(path, failures[0])
        report = self._size_and_names(allowed=listed | {path})
        self.assertEqual(report.failures, [])
        self.assertTrue(any(path in n and "allowed for now" in n
                            for n in report.notes), report.notes)
        # Once a listed file is clean, its entry fails until removed.
        test_file.write_text(clean)
        failures = self._size_and_names(allowed=listed | {path}).failures
        self.assertEqual(len(failures), 1, failures)
        self.assertIn(f"{path} no longer names the extension", failures[0])
        self.assertIn("TESTS_STILL_NAMING_THE_EXTENSION", failures[0])

    def test_committed_messages_and_sources_name_nothing(self) -> None:
        # Strict for every commit message, aten/ file and edit; only the
        # listed test files may still name the extension.
        series = patch_series.build_series(self.root)
        for patch in series.emitted:
            message = patch_series.commit_message(patch)
            self.assertIsNone(patch_series.FORBIDDEN_NAMES.search(message),
                              patch.spec.filename)
            self.assertLessEqual(patch.added, patch_series.MAX_ADDED_LINES,
                                 patch.spec.filename)

    def test_later_patch_edits_a_file_an_earlier_patch_adds(self) -> None:
        # aten/ holds GroupedMMCUDA.cpp after the whole series; patch 4
        # carries it without patch 6's hunks, which patch 6 adds back.
        series = patch_series.build_series(self.root)
        by_name = {p.spec.slug: p for p in series.patches}
        path = "aten/src/ATen/native/cuda/GroupedMMCUDA.cpp"
        final = (self.root / path).read_text()
        self.assertIn("try_launch_sm90_grouped_mm(args)", final)
        cuda = by_name["grouped-mm-device-offsets-cuda"]
        carried = next(d for d in cuda.new_files if d.path == path)
        self.assertNotIn("sm90", "".join(
            line for line in carried.text.splitlines()
            if line.startswith("+") and "try_launch" in line))
        hopper = by_name["grouped-mm-sm90"]
        edit = next(d for d in hopper.edits if d.path == path)
        before = "".join(line[1:] + "\n" for line in carried.text.splitlines()
                         if line.startswith("+") and not line.startswith("+++"))
        self.assertEqual(patch_series.apply_hunks(before, edit), final)
        self.assertTrue(any(h[0] == hopper.spec.filename
                            for h in series.series_hunks))
        # A later change of those lines in aten/ without the hunk fails.
        (self.root / path).write_text(final.replace(
            "grouped_mm::try_launch_sm90_grouped_mm(args) &&",
            "grouped_mm::try_launch_sm90_grouped_mm(args) ||"))
        problems = patch_series.build_series(self.root).problems
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("0006-grouped-mm-sm90.patch", problems[0])
        self.assertIn(f"does not match {path}", problems[0])

    def test_apply_hunks_is_exact(self) -> None:
        old = "".join(f"line {i}\n" for i in range(1, 21))
        new = old.replace("line 5\n", "line 5\nadded\n").replace(
            "line 15\n", "")
        a, b = Path(self._tmp.name, "a"), Path(self._tmp.name, "b")
        a.write_text(old)
        b.write_text(new)
        text = subprocess.run(["diff", "-u", "--label", "a/f", "--label",
                               "b/f", str(a), str(b)], capture_output=True,
                              text=True, check=False).stdout
        diff = patch_series.split_file_diffs("diff --git a/f b/f\n" + text,
                                             "t")[0]
        self.assertEqual(patch_series.apply_hunks(old, diff), new)
        self.assertEqual(patch_series.apply_hunks(new, diff, reverse=True), old)
        with self.assertRaisesRegex(patch_series.HunkMismatch, "@@ -3,6 "):
            patch_series.apply_hunks(old.replace("line 3\n", "line three\n"),
                                     diff)

    def _map_cpp_test(self, name: str) -> None:
        """Adds aten/src/ATen/test/NAME to patch 2's tests."""
        (self.root / "aten/src/ATen/test" / name).write_text("// test\n")
        mapping = self.root / patch_series.MAPPING
        old = 'tests = ["aten/src/ATen/test/cuda_cu_mask_test.cpp"]'
        self.assertIn(old, mapping.read_text())
        mapping.write_text(mapping.read_text().replace(old, (
            'tests = ["aten/src/ATen/test/cuda_cu_mask_test.cpp", '
            f'"aten/src/ATen/test/{name}"]')))

    def test_cpp_tests_belong_to_one_patch(self) -> None:
        extra = self.root / "aten/src/ATen/test/cuda_extra_test.cpp"
        extra.write_text("// test\n")
        problems = patch_series.build_series(self.root).problems
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("cuda_extra_test.cpp is in no patch", problems[0])
        self._map_cpp_test("cuda_extra_test.cpp")
        self.assertEqual(patch_series.build_series(self.root).problems, [])
        mapping = self.root / patch_series.MAPPING
        mapping.write_text(mapping.read_text().replace(
            '"aten/src/ATen/cuda/CUMask*",',
            '"aten/src/ATen/cuda/CUMask*", "aten/src/ATen/test/cuda_ex*",'))
        problems = patch_series.build_series(self.root).problems
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("keep it in `tests` only", problems[0])

    def test_cpp_test_needs_its_cmake_line(self) -> None:
        series = patch_series.build_series(self.root)
        report = check_patches.Report()
        check_patches._check_placement(self.root, series, report)
        self.assertEqual(report.failures, [])
        self._map_cpp_test("cuda_extra_test.cpp")
        series = patch_series.build_series(self.root)
        self.assertIn("aten/src/ATen/test/cuda_extra_test.cpp",
                      [d.path for d in series.patches[1].new_files])
        report = check_patches.Report()
        check_patches._check_placement(self.root, series, report)
        self.assertEqual(len(report.failures), 1, report.failures)
        self.assertIn("cuda_extra_test.cpp: aten/src/ATen/test/CMakeLists.txt "
                      "does not list it", report.failures[0])

    def test_cpp_test_header_needs_no_cmake_line(self) -> None:
        # A header beside the C++ tests is included by them, not built.
        self._map_cpp_test("extra_test_model.h")
        series = patch_series.build_series(self.root)
        self.assertIn("aten/src/ATen/test/extra_test_model.h",
                      [d.path for d in series.patches[1].new_files])
        report = check_patches.Report()
        check_patches._check_placement(self.root, series, report)
        self.assertEqual(report.failures, [])

    def test_stale_patch_file_fails(self) -> None:
        (self.root / "patches/0009-old.patch").write_text("old\n")
        errors = self._generated_errors()
        self.assertTrue(any("0009-old.patch" in e for e in errors))

    def test_native_cpp_with_cuda_include_fails(self) -> None:
        path = self.root / "aten/src/ATen/native/GroupedMM.cpp"
        path.write_text("#include <ATen/cuda/CUDAContext.h>\n" + path.read_text())
        report = check_patches.Report()
        series = patch_series.build_series(self.root)
        check_patches._check_placement(self.root, series, report)
        self.assertEqual(len(report.failures), 1)
        self.assertIn("move it to native/cuda/", report.failures[0])

    def test_new_file_diff_round_trip(self) -> None:
        tree = Path(self._tmp.name, "tree")
        tree.mkdir()
        contents = {"a/with_newline.h": b"int x;\n", "a/without.h": b"int y;",
                    "a/empty.h": b""}
        diff = "".join(patch_series.new_file_diff(p, c) for p, c in contents.items())
        (tree.parent / "new.diff").write_text(diff)
        subprocess.run(["git", "apply", "../new.diff"], cwd=tree, check=True)
        for path, content in contents.items():
            self.assertEqual((tree / path).read_bytes(), content)
            blob = subprocess.run(["git", "hash-object", path], cwd=tree,
                                  capture_output=True, text=True, check=True)
            self.assertIn(blob.stdout.strip()[:7], diff)

    def test_declaration_mismatch_fails(self) -> None:
        decl = ("TORCH_API at::Tensor grouped_mm_cpu(const at::Tensor & self, "
                "const at::Tensor & mat2, const ::std::optional<at::Tensor> & "
                "offs={}, const ::std::optional<at::Tensor> & bias={}, "
                "::std::optional<at::ScalarType> out_dtype=::std::nullopt);")
        report = check_patches.Report()
        errors: list[str] = []
        check_patches._match_declaration(self.root, "grouped_mm_cpu", decl,
                                         True, errors, report)
        self.assertEqual(errors, [])
        header = self.root / "aten/src/ATen/native/GroupedMM.h"
        header.write_text(header.read_text().replace(
            "std::optional<ScalarType> out_dtype", "ScalarType out_dtype"))
        check_patches._match_declaration(self.root, "grouped_mm_cpu", decl,
                                         True, errors, report)
        self.assertEqual(len(errors), 1)
        self.assertIn("torchgen declares", errors[0])

    @unittest.skipIf(not _HAVE_PINNED_TORCH, "needs the pinned torch installed")
    def test_full_check_passes(self) -> None:
        report = check_patches.run_checks(self.root, None, strict=True)
        self.assertEqual(report.failures, [])
        names = [name for name, _, _ in report.rows]
        self.assertTrue(any(n.startswith("torchgen (series)") for n in names))

    @unittest.skipIf(not _HAVE_PINNED_TORCH, "needs the pinned torch installed")
    def test_edit_that_does_not_apply_fails(self) -> None:
        edit = self.root / "patches/edits/0003-grouped-mm-validation-cpu.diff"
        edit.write_text(edit.read_text().replace(
            "    CompositeExplicitAutograd: _grouped_mm\n",
            "    CompositeExplicitAutograd: _grouped_mm_renamed\n"))
        sync_patches.sync(self.root)
        report = check_patches.run_checks(self.root, None, strict=True)
        self.assertTrue(any("does not apply to the installed" in f
                            for f in report.failures), report.failures)

    @unittest.skipIf(not _HAVE_PINNED_TORCH, "needs the pinned torch installed")
    def test_bad_dispatch_yaml_fails_torchgen(self) -> None:
        # Later patches carry the line as context, so rename it everywhere.
        for edit in (self.root / "patches/edits").glob("*.diff"):
            edit.write_text(edit.read_text().replace(
                "    CPU: grouped_mm_cpu", "    NotAKey: grouped_mm_cpu"))
        sync_patches.sync(self.root)
        report = check_patches.run_checks(self.root, None, strict=True)
        self.assertTrue(any("parse_native_yaml" in f for f in report.failures),
                        report.failures)

    @unittest.skipIf(not _HAVE_PINNED_TORCH, "needs the pinned torch installed")
    @unittest.skipIf(shutil.which("g++") is None, "needs g++")
    def test_formula_that_does_not_compile_fails(self) -> None:
        # derivatives.yaml's self/mat2 formula drops an argument of the
        # function it calls: the hunks still apply and torchgen still
        # parses, the generated GroupedMmBackward0 does not compile.
        edit = self.root / "patches/edits/0005-grouped-mm-autograd-meta.diff"
        text = edit.read_text()
        whole = "TensorGeometry(self), TensorGeometry(mat2), self.scalar_type()"
        self.assertEqual(text.count(whole), 1)
        edit.write_text(text.replace(
            whole, "TensorGeometry(self), self.scalar_type()"))
        sync_patches.sync(self.root)
        report = check_patches.run_checks(self.root, None, strict=True)
        self.assertTrue(
            any("autograd nodes compile (series)" in f
                and "grouped_mm_mat1_mat2_backward" in f
                for f in report.failures), report.failures)

    @unittest.skipIf(not _HAVE_PINNED_TORCH, "needs the pinned torch installed")
    def test_series_on_checkout_and_build_apply(self) -> None:
        # A stand-in checkout holding the files the series edits, with the
        # pin rewritten to its commit.
        src = Path(self._tmp.name, "pytorch")
        yaml = src / check_patches.NATIVE_YAML

        def shipped(path: str) -> bool:
            where = check_patches.wheel_file(path, _TORCH.site)
            return where is not None and where.exists()

        # Only files the wheel ships can stand in for upstream; hunks against
        # the others (CUDABlas.cpp) are listed as unverified, so drop them.
        for edit in (self.root / "patches/edits").glob("*.diff"):
            diffs = patch_series.split_file_diffs(edit.read_text(), str(edit))
            edit.write_text("".join(d.text for d in diffs if shipped(d.path)))
        edited = {d.path for p in patch_series.build_series(self.root).emitted
                  for d in p.edits}
        for path in sorted(edited | {check_patches.NATIVE_YAML}):
            (src / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(check_patches.wheel_file(path, _TORCH.site),
                            src / path)
        subprocess.run(["git", "init", "-q"], cwd=src, check=True)
        subprocess.run(["git", "add", "-A"], cwd=src, check=True)
        subprocess.run([*_GIT, "commit", "-qm", "base"], cwd=src, check=True)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src,
                                capture_output=True, text=True,
                                check=True).stdout.strip()
        upstream = self.root / "patches/UPSTREAM"
        upstream.write_text(upstream.read_text().replace(_PIN.commit, commit))
        sync_patches.sync(self.root)
        series = patch_series.build_series(self.root)
        report = check_patches.Report()
        check_patches._check_pytorch_src(src, self.root, series, report)
        self.assertFalse(report.failures, "\n".join(report.failures))
        plan = argparse.Namespace(src=src)
        build_wheel._apply_series(plan, self.root, series.upstream)
        self.assertIn("CPU: grouped_mm_cpu", yaml.read_text())
        self.assertTrue((src / "aten/src/ATen/native/GroupedMM.h").exists())
        build_wheel._apply_series(plan, self.root, series.upstream)  # no-op
        report = check_patches.Report()
        check_patches._check_pytorch_src(src, self.root, series, report)
        self.assertTrue(report.failures)  # already applied: no longer applies
        # PR-ready branches: one per patch, stacked from the pin.
        branches = export_patches.write_branches(self.root, series, src)
        self.assertEqual(len(branches), len(series.emitted))
        subjects = subprocess.run(
            ["git", "log", "--format=%s", "--reverse",
             f"{commit}..{branches[-1]}"], cwd=src, capture_output=True,
            text=True, check=True).stdout.splitlines()
        self.assertEqual(subjects, [p.spec.subject for p in series.emitted])


# Run by test_dtensor_rule_of_grad_to: the patched native function
# defined as an op with a reference CPU kernel, the series' DTensor rule
# executed in its module, then one cast per placement on a fake 4-rank mesh.
_DTENSOR_RULE_PROBE = """
import sys
import torch
import torch.distributed as dist
from torch.distributed.tensor import (
    DeviceMesh, DTensor, Partial, Replicate, Shard)
from torch.distributed.tensor._ops import _tensor_ops
from torch.testing._internal.distributed.fake_pg import FakeStore

schema, rule = sys.argv[1], open(sys.argv[2]).read()
lib = torch.library.Library("aten", "FRAGMENT")
lib.define(schema)
lib.impl("_grouped_mm_grad_to", lambda g, d: g.to(d), "CPU")
lib.impl("_grouped_mm_grad_to",
         lambda g, d: g.new_empty(g.shape, dtype=d), "Meta")
exec(compile(rule, "patched _tensor_ops.py", "exec"), vars(_tensor_ops))
dist.init_process_group("fake", store=FakeStore(), rank=1, world_size=4)
mesh = DeviceMesh("cpu", list(range(4)))
# Local shards made here: the fake mesh's collectives move no data.
for placement, shard in ((Shard(0), (4, 8)), (Shard(1), (16, 2)),
                         (Replicate(), (16, 8))):
    grad = DTensor.from_local(torch.randn(shard), mesh, [placement])
    out = torch.ops.aten._grouped_mm_grad_to(grad, torch.bfloat16)
    assert out.placements == (placement,), (placement, out.placements)
    assert out.shape == (16, 8), out.shape
    assert torch.equal(out.to_local(), grad.to_local().bfloat16())
pending = DTensor.from_local(torch.randn(16, 8), mesh, [Partial()])
out = torch.ops.aten._grouped_mm_grad_to(pending, torch.float16)
assert out.placements == (Partial(),), out.placements
print("placements kept")
"""


def _added_lines(diff: str, path: str) -> str:
    """The lines a diff adds to `path`, without their '+'."""
    lines, inside = [], False
    for line in diff.splitlines():
        if line.startswith("diff --git"):
            inside = line.endswith(f" b/{path}")
        elif inside and line.startswith("+") and not line.startswith("+++"):
            lines.append(line[1:])
    return "\n".join(lines) + "\n"


class TestPatchedDTensorRule(TestCase):
    @unittest.skipIf(not _HAVE_PINNED_TORCH, "needs the pinned torch installed")
    def test_dtensor_rule_of_grad_to(self) -> None:
        # Patch 0005 adds aten::_grouped_mm_grad_to, which a DTensor
        # gradient of an out_dtype=float32 call reaches, and its sharding
        # rule in torch/distributed/tensor/_ops/_tensor_ops.py. The rule's
        # code runs here against the pinned torch's DTensor, with the op
        # defined from the patched schema (no wheel needed).
        edits = (REPO / "patches" / "edits"
                 / "0005-grouped-mm-autograd-meta.diff").read_text()
        rule = _added_lines(
            edits, "torch/distributed/tensor/_ops/_tensor_ops.py")
        self.assertIn("aten._grouped_mm_grad_to.default", rule)
        schema = next(
            line.split("func: ", 1)[1] for line in _added_lines(
                edits, "aten/src/ATen/native/native_functions.yaml"
            ).splitlines() if "func: _grouped_mm_grad_to(" in line)
        with tempfile.TemporaryDirectory() as tmp:
            rule_file = Path(tmp) / "rule.py"
            rule_file.write_text(rule)
            run = subprocess.run(
                [sys.executable, "-c", _DTENSOR_RULE_PROBE, schema,
                 str(rule_file)],
                capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr[-3000:])
        self.assertIn("placements kept", run.stdout)


class TestCheckPytorchSrc(TestCase):
    def test_missing_checkout_is_a_failure_not_a_traceback(self) -> None:
        report = check_patches.Report()
        series = patch_series.build_series(REPO)
        check_patches._check_pytorch_src(Path("/nonexistent/pytorch"), REPO,
                                         series, report)
        self.assertEqual(report.failures, [
            "[git apply --check on checkout] --pytorch-src "
            "/nonexistent/pytorch does not exist"])


class TestBuildWheelPlan(TestCase):
    def _plan(self, which, has_module=lambda name: True, **kwargs):
        args = argparse.Namespace(backend=kwargs.get("backend"), arch_list=None,
                                  max_jobs=4, pytorch_src=kwargs.get("src"),
                                  dry_run=True)
        return build_wheel.make_plan(args, REPO, which=which,
                                     has_module=has_module)

    def test_missing_nvcc_is_reported(self) -> None:
        with unittest.mock.patch.dict(os.environ, {"CUDA_HOME": "/nonexistent"}):
            plan = self._plan(
                lambda tool: None if tool == "nvcc" else f"/bin/{tool}",
                backend="cuda")
        self.assertTrue(any(p.startswith("nvcc not found") for p in plan.problems),
                        plan.problems)

    def test_missing_tools_and_modules_are_reported(self) -> None:
        with unittest.mock.patch.dict(os.environ, {"ROCM_PATH": "/nonexistent"}), \
                tempfile.TemporaryDirectory() as not_a_checkout:
            plan = self._plan(lambda tool: None, has_module=lambda m: m != "yaml",
                              backend="rocm", src=Path(not_a_checkout))
        text = "\n".join(plan.problems)
        for expected in ("git not found", "cmake not found", "ninja not found",
                         "no C++ compiler", "hipcc not found",
                         "pip install pyyaml", "is not a git checkout"):
            self.assertIn(expected, text)
        self.assertEqual(plan.env["USE_ROCM"], "1")
        self.assertEqual(plan.env["PYTORCH_ROCM_ARCH"], "gfx942")

    def test_hopper_without_sm90a_is_refused(self) -> None:
        for arch_list, refused in (("8.0;9.0", True), ("9.0+PTX", True),
                                   ("8.0;9.0a", False), ("9.0;9.0a", False),
                                   ("8.0;8.9", False)):
            with unittest.mock.patch.dict(
                    os.environ, {"TORCH_CUDA_ARCH_LIST": arch_list}):
                plan = self._plan(lambda tool: f"/usr/bin/{tool}", backend="cuda")
            self.assertEqual(any("not 9.0a" in p for p in plan.problems), refused,
                             (arch_list, plan.problems))

    def test_nonexistent_pytorch_src(self) -> None:
        plan = self._plan(lambda tool: f"/usr/bin/{tool}", backend="cuda",
                          src=Path("/nonexistent/pytorch"))
        self.assertTrue(any("/nonexistent/pytorch does not exist" in p
                            for p in plan.problems), plan.problems)

    def test_bad_max_jobs(self) -> None:
        with unittest.mock.patch.dict(os.environ, {"MAX_JOBS": ""}):
            self.assertEqual(build_wheel._max_jobs(None),
                             (1, ["MAX_JOBS must be a positive integer, "
                                  "got ''"]))
        self.assertEqual(build_wheel._max_jobs(3), (3, []))

    def test_no_git_fails_early_without_traceback(self) -> None:
        # No git, no toolchain: a list of what to install, exit status 1,
        # and no attempt to reach the network.
        with unittest.mock.patch.object(build_wheel, "_check_remote") as remote, \
                unittest.mock.patch.dict(os.environ, {"CUDA_HOME": "/nonexistent"}):
            with tempfile.TemporaryDirectory() as tmp:
                root = _copy_repo(Path(tmp))
                rc = build_wheel.main(["--dry-run", "--backend", "cuda"],
                                      root=root, which=lambda tool: None)
        self.assertEqual(rc, 1)
        remote.assert_not_called()

    def test_checkout_needs_pin_and_submodules(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            sub, src = Path(tmp, "sub"), Path(tmp, "pytorch")
            for repo in (sub, src):
                repo.mkdir()
                subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
                (repo / "f").write_text("x\n")
                subprocess.run(["git", "add", "f"], cwd=repo, check=True)
                subprocess.run([*_GIT, "commit", "-qm", "c"], cwd=repo,
                               check=True)
            pin = build_wheel.patch_series.Upstream(
                tag="v0", commit="0" * 40, url="file:///x", version="0")
            problems = build_wheel._checkout_problems(src, pin)
            self.assertIn("does not contain the pinned v0", problems[0])
            head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src,
                                  capture_output=True, text=True,
                                  check=True).stdout.strip()
            pin = build_wheel.patch_series.Upstream(
                tag="v0", commit=head, url="file:///x", version="0")
            self.assertEqual(build_wheel._checkout_problems(src, pin), [])
            subprocess.run([*_GIT, "-c", "protocol.file.allow=always",
                            "submodule", "add", "-q", str(sub),
                            "third_party/sub"], cwd=src, check=True,
                           capture_output=True)
            subprocess.run([*_GIT, "commit", "-qm", "sub"], cwd=src,
                           check=True)
            subprocess.run(["git", "submodule", "deinit", "-q", "-f",
                            "third_party/sub"], cwd=src, check=True)
            problems = build_wheel._checkout_problems(src, pin)
            self.assertEqual(len(problems), 1, problems)
            self.assertIn("third_party/sub", problems[0])
            self.assertIn("submodule update --init --recursive", problems[0])

    def test_cuda_env(self) -> None:
        plan = self._plan(lambda tool: f"/usr/bin/{tool}", backend="cuda")
        self.assertEqual(plan.env["USE_CUDA"], "1")
        self.assertEqual(plan.env["MAX_JOBS"], "4")
        self.assertEqual(plan.env["CMAKE_CUDA_COMPILER_LAUNCHER"], "/usr/bin/ccache")
        self.assertIn("TORCH_CUDA_ARCH_LIST", plan.env)


class TestExport(TestCase):
    def test_descriptions_and_measurements(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            root = _copy_repo(Path(tmp))
            series = patch_series.build_series(root)
            patch = series.emitted[0]
            text = export_patches.pr_description(root, series, patch)
            for heading in ("## Motivation", "## What changed", "## Test plan"):
                self.assertIn(heading, text)
            self.assertIn("No measurements yet.", text)
            results = root / "results"
            results.mkdir()
            (results / f"{patch.spec.results[0].rstrip('*')}.json").write_text(
                json.dumps({"summary": {"geomean_speedup": 1.7}}))
            text = export_patches.pr_description(root, series, patch)
            self.assertIn("geomean_speedup | 1.7", text)
            mbox = export_patches.write_mbox(root, series, Path(tmp))
            self.assertIn(f"[PATCH 1/{len(series.emitted)}]", mbox.read_text())

    def test_grouped_mm_run_summarised_history_skipped(self) -> None:
        rows = [{"case": c, "dist": "balanced", "dtype": "bf16",
                 "pass": "fwd", "ours_us": ours, "stock_us": 100.0,
                 "floor_us": 50.0, "ours_check": "pass"}
                for c, ours in (("a", 80.0), ("b", 125.0))]
        run = {"gpu": "G", "torch": "T", "timestamp": "now",
               "command": "bench", "rows": rows}
        with tempfile.TemporaryDirectory() as tmp:
            root = _copy_repo(Path(tmp))
            series = patch_series.build_series(root)
            patch = next(p for p in series.emitted
                         if "grouped_mm*" in p.spec.results)
            for folder in ("results", "results/history/old"):
                (root / folder).mkdir(parents=True)
                (root / folder / "grouped_mm_results.json").write_text(
                    json.dumps(run))
            (root / "results/grouped_mm_results.md").write_text("# table\n")
            text = export_patches.measurements(root, patch)
        # geomean(0.8, 1.25) = 1.00; worst 1.25 on case b; both checks pass.
        self.assertIn("| bf16 | fwd | 2 | 2.00 | 2.00 | 1.00 | 1.25 (b "
                      "balanced) | 2/2 |", text)
        # Quoted by run name: the text goes upstream, this repo's paths not.
        self.assertIn("From the `grouped_mm_results` run:", text)
        self.assertEqual(text.count("From the "), 1, text)
        self.assertNotIn("results/", text)
        self.assertIn(patch.spec.results_note.splitlines()[0], text)

    def test_description_sections_and_declined_position(self) -> None:
        series = patch_series.build_series(REPO)
        for patch in series.emitted:
            text = export_patches.pr_description(REPO, series, patch)
            for heading in ("## Motivation", "## What changes for users",
                            "## What changed", "## Test plan",
                            "## Measurements", "## Not verified here"):
                self.assertIn(heading, text, patch.spec.filename)
            self.assertIn("(this PR)", text)
            self.assertIsNone(patch_series.FORBIDDEN_NAMES.search(text),
                              patch.spec.filename)
        validation = next(p for p in series.emitted
                          if p.spec.slug == "grouped-mm-validation-cpu")
        text = export_patches.pr_description(REPO, series, validation)
        self.assertIn("## A behaviour upstream declined before", text)
        for ref in ("#154557", "#193633"):
            self.assertIn(ref, text)


if __name__ == "__main__":
    run_tests()
