# Owner(s): ["module: docs"]
"""The README's Python examples run when pasted (on CPU here)."""

from __future__ import annotations

import re
import unittest
from pathlib import Path

from torch.testing._internal.common_utils import run_tests, TestCase

try:
    import overlap_ops  # noqa: F401
    HAS_EXTENSION = True
except ImportError:  # a patched PyTorch wheel
    HAS_EXTENSION = False

README = Path(__file__).resolve().parent.parent / "README.md"


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
        # Every results file or source the README links to is in the repo.
        links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)",
                           README.read_text())
        local = [link for link in links if "://" not in link]
        self.assertGreater(len(local), 10)
        missing = [link for link in local
                   if not (README.parent / link).exists()]
        self.assertEqual(missing, [])


if __name__ == "__main__":
    run_tests()
