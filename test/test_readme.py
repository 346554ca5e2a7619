# Owner(s): ["module: docs"]
"""The README's Python examples run when pasted (on CPU here), its links
resolve, and every environment switch the code reads is documented."""

from __future__ import annotations

import os
import sys
import re
import unittest
from pathlib import Path

from torch.testing._internal.common_utils import run_tests, TestCase

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extension_mode import HAS_EXTENSION, overlap_ops  # noqa: E402,F401

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
# Pages whose relative links must resolve.
DOC_PAGES = (README, REPO / "docs" / "TUNING.md", REPO / "results" / "README.md")


class TestReadme(TestCase):
    @unittest.skipIf(not HAS_EXTENSION, "the examples use the overlap_ops "
                     "extension (extension mode only)")
    def test_python_examples_run(self) -> None:
        blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
        self.assertGreaterEqual(len(blocks), 2)
        for i, block in enumerate(blocks):
            namespace: dict = {}
            exec(compile(block, f"README.md python block {i}", "exec"),
                 namespace)
            self.assertIn("torch", namespace)

    def test_relative_links_resolve(self) -> None:
        # Every results file or source these pages link to is in the repo.
        for page in DOC_PAGES:
            with self.subTest(page=page.relative_to(REPO).as_posix()):
                links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)",
                                   page.read_text())
                local = [link for link in links if "://" not in link]
                self.assertGreater(len(local), 1)
                missing = [link for link in local
                           if not (page.parent / link).exists()]
                self.assertEqual(missing, [])

    def test_every_environment_switch_is_documented(self) -> None:
        # A switch the code reads but docs/TUNING.md does not name is one
        # a user cannot find; the scan covers aten/ (runtime switches) and
        # the Python of the build, the package, the tools and the tests.
        name = r"((?:OVERLAP_OPS|TORCH_GROUPED_MM|GROUPED_MM)_\w+)"
        read_in_cpp = re.compile(r'(?:env_choice|getenv)\(\s*"' + name + '"')
        read_in_python = re.compile(
            r'(?:environ\.get\(|environ\[|getenv\()\s*["\']' + name)
        switches = set()
        for source in (REPO / "aten").rglob("*"):
            if source.suffix in {".h", ".cuh", ".cpp", ".cu"}:
                switches |= set(read_in_cpp.findall(source.read_text()))
        for folder in ("torch_ext", "tools", "test"):
            for source in (REPO / folder).rglob("*.py"):
                if "build" not in source.relative_to(REPO).parts:
                    switches |= set(read_in_python.findall(
                        source.read_text()))
        # Set by setup.py for its own nvcc wrapper, not by users.
        switches.discard("OVERLAP_OPS_REAL_NVCC")
        self.assertIn("TORCH_GROUPED_MM_BACKEND", switches)
        self.assertIn("OVERLAP_OPS_CUDA", switches)
        self.assertGreater(len(switches), 5)
        documented = set(re.findall("`" + name + "`",
                                    (REPO / "docs" / "TUNING.md").read_text()))
        self.assertEqual(sorted(switches - documented), [])
        # And no documented switch is one the code no longer reads.
        self.assertEqual(sorted(documented - switches), [])


if __name__ == "__main__":
    run_tests()
