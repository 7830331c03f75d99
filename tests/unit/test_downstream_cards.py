"""The Crater's library cards (jaxrel/data/downstream-cards.toml): every card checked offline against what the index
served for the library's newest release on the day they were written (tests/data/downstream-cards-recorded.json:
its version, whether it declares jax, its sdist's test-like paths), the cards' parser refusing bad cards in one line,
and the shards of a CI matrix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jaxrel.downstream import run
from jaxrel.downstream.cards import DEFAULT_BUDGET, load_cards, parse_cards, parse_shard, shard
from jaxrel.errors import BadInput

RECORDED = json.loads((Path(__file__).parents[1] / "data" / "downstream-cards-recorded.json").read_text())["libraries"]
CARDS = load_cards()


def test_at_least_forty_libraries_each_with_its_card_and_every_skip_has_its_reason() -> None:
    assert len(CARDS) >= 40
    assert {"optax", "chex", "flax", "equinox", "dm-haiku", "jaxtyping", "rlax", "mctx", "jraph", "penzai", "evosax",
            "jaxopt", "gpjax", "tinygp", "dynamax", "netket", "jax-md", "brax", "gymnax", "pgx", "jaxley"} <= set(CARDS)
    assert all(card.layer for card in CARDS.values())
    assert all(len(card.skip) > 30 for card in CARDS.values() if not card.runnable)
    assert set(CARDS) <= set(RECORDED), "every card's library was recorded from the index"


@pytest.mark.parametrize("name", sorted(n for n, c in CARDS.items() if c.runnable and c.route == "sdist"))
def test_an_sdist_card_names_tests_its_newest_sdist_ships(name: str) -> None:
    card, recorded = CARDS[name], RECORDED[name]
    members = recorded.get("members", [])
    assert card.tests, f"{name}: name the selection"
    for test in card.tests:
        path = test.split("::", 1)[0].rstrip("/")
        assert path in members or any(m.startswith(path + "/") for m in members), \
            f"{name} {recorded['version']}: its sdist has no {path}"


@pytest.mark.parametrize("name", sorted(n for n, c in CARDS.items() if c.runnable and c.route == "repository"))
def test_a_repository_card_is_one_whose_sdist_ships_none_of_its_tests_or_says_why(name: str) -> None:
    members = RECORDED[name].get("members", [])
    shipped = [m for m in members for t in CARDS[name].tests if m == t or m.startswith(t.rstrip("/") + "/")]
    assert not shipped or len(CARDS[name].why) > 30, f"{name}: its sdist ships {shipped[:2]}; say why not the sdist"


def test_a_library_declaring_no_jax_requirement_has_one_assumed_or_is_skipped() -> None:
    silent = sorted(n for n in CARDS if RECORDED[n].get("declares_jax") is False)
    assert silent, "the recorded data has libraries that declare no jax requirement (dm-haiku, jaxtyping)"
    for name in silent:
        card = CARDS[name]
        assert card.assume or card.skip, f"{name} declares no jax requirement: assume one or skip it with why"


def test_a_libraries_line_naming_a_carded_library_takes_its_card(tmp_path: Path) -> None:
    request = run.Request(("optax",), tmp_path, cards=CARDS)
    assert run.card_of(request, "optax==0.2.8") == CARDS["optax"] and run.card_of(request, "optax") == CARDS["optax"]
    assert run.card_of(request, "optax tests/x_test.py") == CARDS["optax"], "the line's own tests override the card's"
    assert run.where_tests(request, "optax tests/x_test.py") == (("tests/x_test.py",), False, None)
    assert run.where_tests(request, "optax budget=5") == (CARDS["optax"].tests, True, None), "the card's: a preference"
    assert run.where_tests(request, "jaxtyping repo=/m/j")[2] == "/m/j"
    assert run.where_tests(request, "jaxtyping")[2] == "https://github.com/patrick-kidger/jaxtyping"
    given = run.Request(("optax",), tmp_path, cards=CARDS, tests=("optax/_src/alias_test.py",))
    assert run.where_tests(given, "optax") == (("optax/_src/alias_test.py",), False, None), "--tests beats the card"
    assert run.card_of(request, "unknown-lib") is None
    assert "jraph" not in run.carded_libraries(CARDS) and "optax" in run.carded_libraries(CARDS)


@pytest.mark.parametrize(("text", "says"), [
    ("[cards.a]\nlayer = 'x'\nbudgt = 5\n", "[cards.a]: unknown key 'budgt'"),
    ("[cards.a]\nlayer = 'x'\nbudget = -5\n", "[cards.a] budget: '-5' is not a number of seconds"),
    ("[cards.a]\nlayer = 'x'\nroute = 'ftp'\n", "[cards.a] route: 'ftp' is not one of sdist, repository, smoke"),
    ("[cards.a]\nlayer = 'x'\nroute = 'smoke'\n", "route \"smoke\" needs the smoke code"),
    ("[cards.a]\nlayer = 'x'\ntests = 'one.py'\n", "[cards.a] tests: not a list of strings"),
    ("[cards.a]\nlayer = 'x'\nassume = 'jax>='\n", "[cards.a] assume: 'jax>=' is not a requirement"),
    ("[cards.A_b]\nlayer = 'x'\n", "write the name as the index does (a-b)"),
    ("[cards.a]\nroute = 'sdist'\n", "[cards.a] layer: not a non-empty string"),
    ("[cards]\n", "no [cards.NAME] table"),
    ("[cards.a\n", "cards.toml"),
])
def test_a_bad_card_is_one_line_naming_the_card_and_the_key(text: str, says: str) -> None:
    with pytest.raises(BadInput) as refused:
        parse_cards(text, "cards.toml")
    assert says in str(refused.value) and len(str(refused.value).splitlines()) == 1, str(refused.value)


def test_a_cards_file_is_read_and_its_problems_named(tmp_path: Path) -> None:
    path = tmp_path / "cards.toml"
    path.write_text("[cards.mine]\nlayer = 'mine'\ntests = ['t']\nbudget = 60\n")
    assert load_cards(path)["mine"].budget == 60.0
    with pytest.raises(BadInput):
        load_cards(tmp_path / "absent.toml")


def test_shards_split_the_cards_evenly_by_their_times_and_every_job_computes_the_same_split() -> None:
    runnable = [n for n, c in CARDS.items() if c.runnable]
    seconds = {n: CARDS[n].budget or DEFAULT_BUDGET for n in runnable}
    parts = [shard(runnable, seconds, i, 4) for i in range(1, 5)]
    assert sorted(n for part in parts for n in part) == sorted(runnable), "every card in exactly one shard"
    loads = [sum(seconds[n] for n in part) for part in parts]
    assert max(loads) - min(loads) <= max(seconds.values()), loads
    assert parts == [shard(list(reversed(runnable)), seconds, i, 4) for i in range(1, 5)], "order does not matter"
    # a recorded time moves a library: the slow one gets a shard to itself
    timed = shard(["a", "b", "c", "d"], {"a": 3000, "b": 10, "c": 10, "d": 10}, 1, 2)
    assert timed == ["a"]
    assert run.carded_libraries(CARDS, (2, 4)) == tuple(parts[1])


@pytest.mark.parametrize("text", ["0/4", "5/4", "2", "a/b", "1/0", ""])
def test_a_bad_shard_is_refused(text: str) -> None:
    with pytest.raises(BadInput):
        parse_shard(text)
    assert parse_shard("3/4") == (3, 4)


def _repository(root: Path) -> Path:
    """A library's repository whose release 0.3.1 is tagged ``v.0.3.1`` (evosax's format), its tests reading a data
    file by the repository's path."""
    import subprocess

    tree = root / "lib"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / "test_data.py").write_text("def test_reads():\n    assert open('data/x.txt').read() == 'x'\n")
    (tree / "data").mkdir()
    (tree / "data" / "x.txt").write_text("x")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "release"], ["tag", "v.0.3.1"]):
        subprocess.run([*git, *args], cwd=tree, check=True, capture_output=True)
    return tree


def test_a_cards_tag_format_and_files_reach_the_staged_tests(tmp_path: Path) -> None:
    from jaxrel.distributions.index import Index
    from jaxrel.downstream.library import Library, LibraryError
    from jaxrel.downstream.testsource import stage, tag_candidates

    library = Library("evolib", "0.3.1", ())
    assert tag_candidates(library, "v.{version}")[:2] == ["v.0.3.1", "v0.3.1"]
    repository = _repository(tmp_path)
    index = Index([], [])
    staged = stage(library, tmp_path / "stage", index=index, repository=str(repository), files=("data",),
                   tag="v.{version}")
    assert staged.route.startswith("tag v.0.3.1 of") and (staged.root / "data" / "x.txt").read_text() == "x"
    with pytest.raises(LibraryError, match="has no tag v0.3.1, 0.3.1"):
        stage(library, tmp_path / "again", index=index, repository=str(repository))
    with pytest.raises(LibraryError, match="fixtures: not in the tests' tree; fix the card's files"):
        stage(library, tmp_path / "third", index=index, repository=str(repository), files=("fixtures",),
              tag="v.{version}")
    with pytest.raises(BadInput, match="does not hold {version}"):
        parse_cards("[cards.a]\nlayer = 'x'\ntag = 'v1'\n", "cards.toml")


def test_a_repository_s_test_dependency_group_gives_the_tests_requirements(tmp_path: Path) -> None:
    """equinox 0.13.8 declares its tests' requirements only as a PEP 735 group (``tests = ["beartype", ...]``): the
    first real Crater at scale found its tests broken without it (ModuleNotFoundError: beartype)."""
    from jaxrel.downstream.testsource import dependency_group

    (tmp_path / "pyproject.toml").write_text(
        '[dependency-groups]\ndev = ["ruff"]\nbase = ["optax"]\ntests = ["beartype", {include-group = "base"}]\n')
    assert dependency_group(tmp_path) == ("beartype", "optax")
    (tmp_path / "pyproject.toml").write_text('[dependency-groups]\ntests = [{include-group = "tests"}]\n')
    assert dependency_group(tmp_path) == (), "a cycle is no group"
    (tmp_path / "pyproject.toml").write_text('[dependency-groups]\ndev = ["ruff"]\n')
    assert dependency_group(tmp_path) == ()
    (tmp_path / "pyproject.toml").write_text("not toml [")
    assert dependency_group(tmp_path) == ()


def test_a_cards_selection_is_a_preference_in_an_older_release(tmp_path: Path) -> None:
    """A card's tests are chosen at the newest release; the Crater may judge an older one (gymnax 0.0.9 lacks
    tests/test_spaces.py): those that exist run, else its default tests. A selection given on the command line
    must exist."""
    from jaxrel.distributions.index import Index
    from jaxrel.downstream.library import Library, LibraryError
    from jaxrel.downstream.testsource import stage

    library, repository, index = Library("evolib", "0.3.1", ()), _repository(tmp_path), Index([], [])
    some = stage(library, tmp_path / "a", index=index, repository=str(repository), tag="v.{version}", files=("data",),
                 selection=("tests/test_data.py", "tests/test_new.py"), preferred=True)
    assert some.paths == ("tests/test_data.py",) and "only tests/test_data.py exist in this release" in some.route
    none = stage(library, tmp_path / "b", index=index, repository=str(repository), tag="v.{version}",
                 files=("data",), selection=("tests/test_new.py",), preferred=True)
    assert none.paths == ("tests",) and "the card's tests are not in this release: its default tests" in none.route
    with pytest.raises(LibraryError, match="--tests tests/test_new.py: not in the library's tests"):
        stage(library, tmp_path / "c", index=index, repository=str(repository), tag="v.{version}",
              selection=("tests/test_new.py",))


def test_a_repository_card_never_takes_the_sdist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """jaxlie's sdists ship its test modules without their helper: its card's route is the repository, so the sdist
    is not even read (the first real run took the sdist since it held the selection)."""
    from jaxrel.distributions.index import Index
    from jaxrel.downstream import testsource
    from jaxrel.downstream.library import Library

    def no_sdist(*args: object) -> None:
        raise AssertionError("the sdist was read")

    monkeypatch.setattr(testsource, "_unpacked_sdist", no_sdist)
    library, repository = Library("evolib", "0.3.1", ()), _repository(tmp_path)
    staged = testsource.stage(library, tmp_path / "a", index=Index([], []), repository=str(repository),
                              tag="v.{version}", files=("data",), from_repository=True)
    assert staged.route.startswith("tag v.0.3.1 of")
