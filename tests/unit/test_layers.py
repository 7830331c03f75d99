"""The package's layers, checked on its imports: data flows down, never up or sideways.

core (errors, policy, guard, gating, family, releasedata, _util) < distributions (index, wheels,
installed environments, interpreters, Bazel) < cells (what every run over (Python, backend, plugins)
cells shares) < features (compat, atlas, bisect, downstream, gates, release, extension, doctor) < cli.
A feature never imports another feature; cells import no feature; distributions import neither.
"""

from __future__ import annotations

import ast
from pathlib import Path

import jaxrel

PACKAGE = Path(jaxrel.__file__).parent
FEATURES = ("compat", "atlas", "bisect", "downstream", "gates", "release", "extension", "doctor")
# _entry (the console script) sits with the cli: it imports the command line under its start-up handler
LAYER_OF = {"distributions": 1, "cells": 2, **{name: 3 for name in FEATURES}, "history": 4, "cli": 5, "_entry": 5}
FEATURE_LAYER = 3


def _layer(module: str) -> tuple[int, str]:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    return LAYER_OF.get(top, 0), top


def _imports(path: Path, submodules: bool = False) -> list[str]:
    """The jaxrel modules ``path`` imports (``submodules``: ``from jaxrel.x import y`` also as ``jaxrel.x.y``)."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names
                                      if node.module == "jaxrel" or submodules]
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


def _against_the_layers(module: str, target: str) -> bool:
    own_layer, own_top = _layer(module)
    layer, top = _layer(target)
    if top == own_top:
        return False
    return layer > own_layer or layer == own_layer == FEATURE_LAYER


def test_imports_only_go_down_and_features_do_not_import_each_other() -> None:
    wrong = [f"{module} imports {target}" for module, path in _modules() for target in _imports(path)
             if _against_the_layers(module, target)]
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


OLD_HOMES = ("jaxrel.dist.", "jaxrel.compat.bisect", "jaxrel.compat.atlas", "jaxrel.compat.celldriver",
             "jaxrel.compat.cellplugin", "jaxrel.compat.cellrecord", "jaxrel.compat.runner")


def test_the_old_homes_are_gone() -> None:
    """``jaxrel.dist`` became ``jaxrel.distributions``; bisect and the atlas left ``jaxrel.compat``."""
    old = [f"{module} imports {target}" for module, path in _modules() for target in _imports(path)
           if target == "jaxrel.dist" or target.startswith(OLD_HOMES)]
    assert not old, "\n".join(old)
    assert not (PACKAGE / "dist").exists() and not (PACKAGE / "compat" / "runner.py").exists()


def test_every_library_module_declares_its_public_names() -> None:
    missing = [module for module, path in _modules()
               if not module.startswith("jaxrel.cli") and path.name != "__init__.py"
               and "__all__" not in {t.id for node in ast.parse(path.read_text()).body
                                     if isinstance(node, ast.Assign) for t in node.targets
                                     if isinstance(t, ast.Name)}]
    assert not missing, "modules without __all__:\n" + "\n".join(missing)


MAX_LINES = 410  # "about 400": one concept per module; the guard stays one standard-library file by design


def test_no_module_is_over_about_400_lines_but_the_guard() -> None:
    long = [f"{module}: {lines}" for module, path in _modules()
            if (lines := len(path.read_text().splitlines())) > MAX_LINES and module != "jaxrel.guard"]
    assert not long, "split these along their seams:\n" + "\n".join(long)


def test_the_check_sees_a_sideways_import(tmp_path: Path) -> None:
    probe = tmp_path / "x.py"
    probe.write_text("from jaxrel.cells.matrix import Cell\nfrom jaxrel import release\n")
    assert _imports(probe) == ["jaxrel.cells.matrix", "jaxrel", "jaxrel.release"]
    assert _layer("jaxrel.release.plan") == (3, "release")
    assert _layer("jaxrel.distributions.index") == (1, "distributions")
    assert _against_the_layers("jaxrel.atlas.measure", "jaxrel.compat.options")  # feature → feature
    assert _against_the_layers("jaxrel.cells.environment", "jaxrel.compat.cell")  # cells → feature
    assert _against_the_layers("jaxrel.distributions.index", "jaxrel.cells.matrix")  # up
    assert _against_the_layers("jaxrel.family.model", "jaxrel.distributions.wheels")  # core → up
    assert _against_the_layers("jaxrel.compat.run", "jaxrel.history.store")  # a feature → the service above it
    assert not _against_the_layers("jaxrel.history.ingest", "jaxrel.bisect.search")  # the service uses features
    assert not _against_the_layers("jaxrel.bisect.step", "jaxrel.cells.environment")
    assert not _against_the_layers("jaxrel.cli.compat", "jaxrel.bisect.command")


def _module_of(target: str, known: set[str]) -> str | None:
    """The module an import names (``jaxrel.cells.plugin_install.PluginInstall`` → its module), if it is one."""
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or None


def test_no_import_circles_not_even_for_type_checking() -> None:
    """Within a layer modules may import each other, but never in a circle: every import counts, those under
    ``if TYPE_CHECKING:`` and inside functions included (a circle there is a design knot, not a fix)."""
    modules = dict(_modules())
    known = set(modules)
    graph = {module: {m for t in _imports(path, submodules=True) if (m := _module_of(t, known)) and m != module
                      and not m.endswith("__init__") and m != "jaxrel"}
             for module, path in modules.items()}
    circles = []
    state: dict[str, int] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                circles.append(" -> ".join(trail[trail.index(target):] + [target]))
            elif target not in state:
                visit(target, [*trail, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_no_two_test_modules_share_a_name() -> None:
    """pytest imports test modules by their base name (rootdir, prepend): two of one name in different folders make
    the run fail to collect the second ("import file mismatch"), in CI's one pytest run over tests/."""
    names: dict[str, list[str]] = {}
    for path in sorted((Path(__file__).resolve().parents[1]).rglob("test_*.py")):
        if "data" not in path.parts:
            names.setdefault(path.name, []).append(str(path))
    assert not {name: paths for name, paths in names.items() if len(paths) > 1}
