"""Git for ``jaxrel bisect``: the user's checkout read only, a private bare clone where ``git bisect`` runs.

The user's repository is only read (``rev-parse``, ``merge-base``, ``cat-file``). Everything
that writes (``git bisect start``, ``BISECT_HEAD``, the ``refs/bisect/*`` refs) happens in a
bare clone in the work directory made with ``git clone --bare --shared``: it borrows the
user's objects (nothing copied), registers no worktree and moves no ``HEAD`` of theirs.
A revision is exported with ``git archive`` of a few paths (a mirror may lack blobs
elsewhere, e.g. large images), never checked out.
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import subprocess
import tarfile
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from jaxrel._util import procs, tarballs
from jaxrel._util.text import tail
from jaxrel.distributions.sources import git_environment
from jaxrel.errors import BadInput, EnvironmentFailure

__all__ = ["MAX_ARCHIVE", "REVISION", "STOP_GRACE", "Commit", "GitError", "Outcome", "Repo", "Source", "check_revision",
           "locate"]

STOP_GRACE = 10.0  # seconds the step gets to clean up after SIGINT, before SIGKILL
MAX_ARCHIVE = 4 << 30  # bytes of one revision exported by git archive (jax: tens of MB)
HASH = re.compile(r"\b[0-9a-f]{40}\b")


class GitError(EnvironmentFailure):
    """A git command failed where it should not have (exit 3)."""


REVISION = re.compile(r"[A-Za-z0-9_./@{}~^:+-]{1,256}")


def check_revision(rev: object, option: str) -> str:
    """``rev`` if git can take it as a revision argument and nothing else (no option, no whitespace or control
    character, no NUL, at most 256 characters), else one :class:`BadInput` line naming ``option``."""
    if not isinstance(rev, str) or not REVISION.fullmatch(rev) or rev.startswith("-") or ".." in rev:
        shown = repr(rev)[:60] if isinstance(rev, str) else type(rev).__name__
        raise BadInput(f"{option} {shown}: not a git revision (a branch, tag or commit hash such as HEAD or "
                       "jax-v0.11.0)")
    return rev


def git(*args: str, cwd: Path | None = None, git_dir: Path | None = None, check: bool = True,
        timeout: float = 600, cleanup: bool = False) -> subprocess.CompletedProcess[str]:
    """Run git (with ``--git-dir`` when given); raise :class:`GitError` on failure when ``check``. ``cleanup``: runs
    while jaxrel stops after an interrupt (:func:`jaxrel._util.procs.popen`)."""
    command = ["git", *(["--git-dir", str(git_dir)] if git_dir else []), *args]
    done = procs.run(command, cwd=cwd, timeout=timeout, env=git_environment(), cleanup=cleanup)
    if check and done.returncode != 0:
        raise GitError(f"git {' '.join(args[:3])} failed (exit {done.returncode}): {tail(done.stderr or done.stdout)}")
    return done


@dataclass(frozen=True)
class Source:
    """The user's frontend source: the repository's git dir and the frontend's directory inside it."""

    git_dir: Path  # absolute
    subdir: str  # "" at the top, "frontend" in a monorepo

    def path(self, relative: str) -> str:
        """``relative`` (inside the frontend) as a path from the repository's top."""
        return f"{self.subdir}/{relative}" if self.subdir else relative


def locate(path: Path) -> Source:
    """The git repository holding ``path`` (a checkout, or a bare repository for the whole tree); read only."""
    if not path.is_dir():
        raise BadInput(f"--frontend-src {path}: not a directory; pass the frontend's git checkout")
    try:
        top = git("rev-parse", "--show-toplevel", cwd=path, check=False)
        common = git("rev-parse", "--absolute-git-dir", cwd=path, check=False)
    except FileNotFoundError:
        raise EnvironmentFailure("git is not installed; install git to bisect") from None
    if common.returncode != 0:
        raise BadInput(f"--frontend-src {path}: not a git checkout (git rev-parse: "
                       f"{tail(common.stderr, 1)}); bisect needs the frontend's history")
    git_dir = Path(common.stdout.strip())
    if top.returncode != 0 or not top.stdout.strip():  # a bare repository: the frontend is its whole tree
        return Source(git_dir, "")
    subdir = path.resolve().relative_to(Path(top.stdout.strip()).resolve()).as_posix()
    return Source(git_dir, "" if subdir == "." else subdir)


@dataclass(frozen=True)
class Commit:
    """One commit as a report shows it."""

    hash: str
    subject: str
    author: str
    date: str  # ISO 8601, the author date
    parents: tuple[str, ...] = ()
    files: tuple[str, ...] = field(default=())

    @property
    def short(self) -> str:
        return self.hash[:12]

    @property
    def merge(self) -> bool:
        return len(self.parents) > 1


@dataclass
class Outcome:
    """What ``git bisect run`` concluded: one first bad commit, or several it could not tell apart."""

    first_bad: str | None
    candidates: list[str]
    output: str


class Repo:
    """The private bare clone in which ``git bisect`` runs."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir

    @classmethod
    def clone(cls, source: Source, dest: Path) -> Repo:
        """A fresh ``git clone --bare --shared`` of ``source`` at ``dest`` (replaced)."""
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        git("clone", "--quiet", "--bare", "--shared", "--no-tags", str(source.git_dir), str(dest))
        return cls(dest)

    def run(self, *args: str, check: bool = True, timeout: float = 600,
            cleanup: bool = False) -> subprocess.CompletedProcess[str]:
        return git(*args, git_dir=self.git_dir, check=check, timeout=timeout, cleanup=cleanup)

    def fetch_commits(self, hashes: Sequence[str]) -> None:
        """Make sure ``hashes`` are reachable here (a clone copies branches; a detached commit needs a ref)."""
        for number, commit in enumerate(hashes):
            self.run("update-ref", f"refs/jaxrel/endpoint-{number}", commit)

    def commit(self, rev: str, *, files: bool = False) -> Commit:
        done = self.run("show", "-s", "--format=%H%x00%P%x00%an <%ae>%x00%aI%x00%s", rev)
        hash_, parents, author, date, subject = done.stdout.rstrip("\n").split("\0", 4)
        changed: tuple[str, ...] = ()
        if files:
            listing = self.run("diff-tree", "--no-commit-id", "--name-only", "-r", "-m", "--first-parent",
                               "--root", hash_).stdout
            changed = tuple(dict.fromkeys(line for line in listing.splitlines() if line))
        return Commit(hash_, subject, author, date, tuple(parents.split()), changed)

    def count(self, bad: str, goods: Sequence[str]) -> int:
        """Commits in the range git bisects: reachable from ``bad``, not from any good."""
        return int(self.run("rev-list", "--count", bad, *(f"^{g}" for g in goods)).stdout.strip())

    def paths(self, rev: str, source: Source, wanted: Sequence[str]) -> list[str]:
        """What to export at ``rev``: the frontend's top-level files and the directories in ``wanted``
        (its package, the tests' top directories), as paths from the repository's top; those present."""
        prefix = f"{rev}:{source.subdir}" if source.subdir else f"{rev}^{{tree}}"
        listing = self.run("ls-tree", "-z", prefix, check=False)
        if listing.returncode != 0:
            return []
        found: list[str] = []
        tops = {w.strip("/").split("/")[0] for w in wanted}
        for entry in listing.stdout.split("\0"):
            if not entry:
                continue
            meta, name = entry.split("\t", 1)
            kind = meta.split()[1]
            if kind == "blob" or (kind == "tree" and name in tops):
                found.append(source.path(name))
        return sorted(found)

    def tree_key(self, rev: str, paths: Sequence[str]) -> str:
        """A digest of the git object ids of ``paths`` at ``rev``: equal trees, equal keys."""
        specs = [f"{rev}:{path}" for path in paths]
        done = self.run("rev-parse", *specs) if specs else None
        ids = done.stdout.split() if done else []
        text = "\n".join(f"{path} {object_id}" for path, object_id in zip(paths, ids, strict=True))
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def export(self, rev: str, paths: Sequence[str], dest: Path) -> None:
        """Write ``paths`` at ``rev`` into a fresh ``dest`` (``git archive``; nothing checked out)."""
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        done = procs.run(["git", "--git-dir", str(self.git_dir), "archive", "--format=tar", rev, "--", *paths],
                         timeout=600, text=False, max_output=MAX_ARCHIVE, env=git_environment())
        if done.returncode != 0:
            raise GitError(f"git archive {rev[:12]} failed (exit {done.returncode}): "
                           f"{tail(done.stderr.decode(errors='replace'))}")
        with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
            tarballs.extract_all(archive, dest, trusted_links=True)

    def start(self, bad: str, goods: Sequence[str]) -> str:
        """``git bisect start --no-checkout BAD GOOD…`` (``BISECT_HEAD`` moves, nothing is checked out); its output."""
        self.run("bisect", "reset", check=False, cleanup=True)  # on the way out of an interrupt too
        return self.run("bisect", "start", "--no-checkout", bad, *goods).stdout

    def head(self) -> str:
        """The revision ``git bisect`` asks about now."""
        return self.run("rev-parse", "BISECT_HEAD").stdout.strip()

    def log(self) -> str:
        return self.run("bisect", "log", check=False).stdout

    def reset(self) -> None:
        self.run("bisect", "reset", check=False, cleanup=True)  # on the way out of an interrupt too

    def bisect_run(self, command: Sequence[str], env: dict[str, str], progress: Callable[[str], None]) -> Outcome:
        """``git bisect run COMMAND`` after :meth:`start`: git's messages and the step's ``bisect:`` lines go to
        ``progress`` as they come. On an interrupt (or any error) git and the step it runs are stopped, whole,
        and the bisection reset before the exception goes on.
        """
        # git runs in a session of its own (Ctrl-C reaches jaxrel, which stops git and its step whole)
        process = procs.popen(["git", "--git-dir", str(self.git_dir), "bisect", "run", *command],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        lines: deque[str] = deque(maxlen=100_000)  # git's own lines are few; a step that floods them is cut
        try:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append(line[:10_000])
                text = line.rstrip()
                if text.startswith(("Bisecting:", "bisect: ")):
                    progress(text if text.startswith("bisect: ") else f"bisect: {text}")
            process.wait()
        except BaseException:
            procs.stop(process, grace=STOP_GRACE)
            self.reset()
            raise
        return parse_outcome("".join(lines))


def parse_outcome(output: str) -> Outcome:
    """The first bad commit ``git bisect run`` printed, or the candidates it could not tell apart."""
    for line in output.splitlines():
        if line.strip().endswith("is the first bad commit") and (found := HASH.search(line)):
            return Outcome(found.group(0), [found.group(0)], output)
    if "could be any of" in output:
        after = output.split("could be any of", 1)[1]
        candidates = [m.group(0) for line in after.splitlines() if (m := HASH.fullmatch(line.strip()))]
        return Outcome(None, candidates, output)
    return Outcome(None, [], output)

