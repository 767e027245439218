"""The package keeps a shape a reader can follow: small classes, and the learners apart from their kernels.

- No class in ``src/`` is over :data:`MAX_CLASS_LINES` lines (``end_lineno - lineno + 1``, decorators not
  counted): a class that grows past it mixes concerns and is split by concern.
- ``purebandits/algorithms/`` holds the public learner modules only, each listing a class it defines in
  ``__all__`` (that is how the package discovers learners); the private rules and compiled fast paths sit in
  ``algorithms/kernels/``, and no kernel imports a learner module (learner -> fast path -> rule, one way).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ALGORITHMS = SRC / "purebandits" / "algorithms"
KERNELS = ALGORITHMS / "kernels"

#: the longest class allowed in src/ (issue 40: "no class over about 600 lines")
MAX_CLASS_LINES = 600


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def long_classes(root: Path, limit: int = MAX_CLASS_LINES) -> list[str]:
    """``path:line Class (n lines)`` for every class under ``root`` (nested ones too) longer than ``limit``."""
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    out.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({n} lines)")
    return out


def test_no_class_over_600_lines():
    assert long_classes(SRC) == [], f"split these classes by concern (at most {MAX_CLASS_LINES} lines each)"


def test_the_class_length_check_finds_a_long_class(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_CLASS_LINES))
    (tmp_path / "m.py").write_text(f"class Short:\n    pass\n\n\nclass Long:\n{body}\n")
    assert long_classes(tmp_path) == [f"m.py:5 Long ({MAX_CLASS_LINES + 1} lines)"]


def _exported_classes(tree: ast.Module) -> set[str]:
    """The names in the module's literal ``__all__`` that are classes defined at its top level."""
    exported: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
            exported |= {e.value for e in ast.walk(node.value)
                         if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return exported & {n.name for n in tree.body if isinstance(n, ast.ClassDef)}


def test_algorithms_top_level_holds_learner_modules_only():
    assert (KERNELS / "__init__.py").is_file()
    stray = [p.name for p in ALGORITHMS.glob("*.py") if p.name != "__init__.py" and p.name.startswith("_")]
    assert stray == [], f"private rules and fast paths belong in algorithms/kernels/, not at the top: {stray}"
    no_learner = [p.name for p in sorted(ALGORITHMS.glob("*.py"))
                  if p.name != "__init__.py" and not _exported_classes(_tree(p))]
    assert no_learner == [], f"a module of algorithms/ that exports no learner class belongs in kernels/: {no_learner}"
    subpackages = sorted(p.name for p in ALGORITHMS.iterdir() if (p / "__init__.py").is_file())
    assert subpackages == ["kernels"]


def test_kernels_import_no_learner_module():
    learners = {f"purebandits.algorithms.{p.stem}" for p in ALGORITHMS.glob("*.py") if p.name != "__init__.py"}
    found = []
    for path in sorted(KERNELS.glob("*.py")):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            found += [f"{path.name} imports {m}" for m in names if m in learners or m == "purebandits.algorithms"]
    assert found == [], "kernels serve the learners; a learner module imported from kernels/ makes a cycle"
