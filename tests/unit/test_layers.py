"""The package's layers, checked on its imports: data flows down, never up or sideways.

core (errors, policy, guard, gating, family, releasedata, doctor, _util) < dist (distributions:
index, wheels, environments, interpreters, Bazel) < features (compat, release, gates, extension)
< cli. A feature never imports another feature; dist and core import no feature.
"""

from __future__ import annotations

import ast
from pathlib import Path

import jaxrel

PACKAGE = Path(jaxrel.__file__).parent
FEATURES = ("compat", "release", "gates", "extension")
LAYER_OF = {**{name: 2 for name in FEATURES}, "dist": 1, "cli": 3}


def _layer(module: str) -> tuple[int, str]:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    return LAYER_OF.get(top, 0), top


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names
                                      if node.module == "jaxrel"]
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return [name for name in found if name == "jaxrel" or name.startswith("jaxrel.")]


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        if "suite" in relative.parts or relative.name == "__main__":  # cell code; `python -m jaxrel`
            continue
        out.append((".".join(relative.parts), path))
    return out


def test_imports_only_go_down_and_features_do_not_import_each_other() -> None:
    wrong = []
    for module, path in _modules():
        own_layer, own_top = _layer(module)
        for target in _imports(path):
            layer, top = _layer(target)
            if top == own_top:
                continue
            if layer > own_layer or (layer == own_layer == 2):
                wrong.append(f"{module} imports {target}")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_the_check_sees_a_sideways_import(tmp_path: Path) -> None:
    probe = tmp_path / "x.py"
    probe.write_text("from jaxrel.compat.matrix import Cell\nfrom jaxrel import release\n")
    assert _imports(probe) == ["jaxrel.compat.matrix", "jaxrel", "jaxrel.release"]
    assert _layer("jaxrel.release.plan") == (2, "release")
    assert _layer("jaxrel.dist.index") == (1, "dist")
