"""Was a version released? One answer whether or not the checkout has its tags.

A version is released when the index holds files of the lead distribution at it (the index is where
users get it); the release tag says so too where the checkout has tags. CI's default checkout is a
depth-1 clone without tags, and an exported tree has none: there only the index is asked. The two
are combined without choosing a path silently:

* ``--released V`` (or ``--released none``) says it outright; nothing is asked.
* Else each witness that can answer does: the tag (present: yes; other release tags present but not
  this one: no; no release tag at all, or not a git checkout: cannot say) and the index (files at V:
  yes; none: no; unreachable: cannot say).
* They agree, or one alone answers: that is the answer. They disagree, or neither can answer: a
  :class:`ReleasedError` naming both and the fix (``git fetch --tags``, or ``--released``).

When the index answers, it also says when: the first upload of V, whose UTC date is the release date a
post-release bump writes into the changelog (``--release-date`` overrides it).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from jaxrel.distributions.index import Index, IndexClientError
from jaxrel.distributions.pages import parse_time
from jaxrel.errors import BadInput
from jaxrel.release.project import Project

__all__ = ["NOT_RELEASED", "Released", "ReleasedError", "on_index", "tag_witness", "was_released"]

NOT_RELEASED = "none"  # --released none: the declared version was never released (renumbered, as jax's 0.8.3 was not)


class ReleasedError(BadInput):
    """Whether the version was released cannot be decided; nothing was written."""


@dataclass(frozen=True)
class Released:
    """The answer, and what gave it."""

    version: str
    released: bool
    how: str  # one line: the witnesses
    first_upload: datetime.datetime | None = None  # from the index, when it holds the version


def tag_witness(project: Project, version: str) -> bool | None:
    """The release tag's word: ``True`` when ``version``'s tag is in the checkout, ``False`` when other release
    tags are and this one is not, ``None`` when there are no release tags to ask (a shallow CI checkout, an
    exported tree, not a git checkout)."""
    if project.sdist is not None or not project.is_git:
        return None
    tag = project.release.tag_for(version)
    if project.git("rev-parse", "--verify", "--quiet", f"refs/tags/{tag}").returncode == 0:
        return True
    pattern = project.release.tag_for("*")
    listed = project.git("tag", "--list", pattern)
    return False if listed.returncode == 0 and listed.stdout.strip() else None


def on_index(index: Index, distribution: str, version: str,
             as_of: datetime.datetime | None = None) -> tuple[bool, datetime.datetime | None]:
    """Whether the index holds files of ``distribution`` at ``version`` (as of ``as_of``), and the first upload's
    time when it says; :class:`IndexClientError` when it cannot be asked."""
    files = index.listing(distribution).as_of(as_of).files_for(Version(version))
    times = sorted(parse_time(f.upload_time) for f in files if f.upload_time)
    return bool(files), (times[0] if times else None)


def was_released(project: Project, version: str, index: Index | None, *, given: str | None = None,
                 as_of: datetime.datetime | None = None) -> Released:
    """Whether ``version`` of the lead distribution was released (see the module doc)."""
    distribution = project.release.lead().distribution
    if given is not None:
        if given == NOT_RELEASED:
            return Released(version, False, "--released none")
        try:
            same = Version(given) == Version(version)
        except InvalidVersion:
            raise ReleasedError(f"--released {given[:40]!r}: expected the declared version {version} or "
                                f"'{NOT_RELEASED}'") from None
        if not same:
            raise ReleasedError(f"--released {given}: the tree declares {version}; say --released {version} (it "
                                f"was released) or --released {NOT_RELEASED} (it was not)")
        return Released(version, True, f"--released {given}")
    tag = project.release.tag_for(version)
    by_tag = tag_witness(project, version)
    by_index, first, why_not = None, None, "not asked"
    if index is not None:
        try:
            by_index, first = on_index(index, distribution, version, as_of)
        except IndexClientError as error:
            why_not = str(error).split("; ")[0][:200]
    said_tag = {True: f"the tag {tag} is here", False: f"the tag {tag} is not among this checkout's release tags",
                None: "the checkout has no release tags"}[by_tag]
    said_index = (f"the index {'holds' if by_index else 'has no'} {distribution} {version}"
                  if by_index is not None else f"the index could not be asked ({why_not})")
    how = f"{said_tag}; {said_index}"
    fix = (f"fetch the tags (git fetch --tags), or say it: --released {version} (it was released) or --released "
           f"{NOT_RELEASED} (it was not)")
    if by_tag is None and by_index is None:
        raise ReleasedError(f"cannot tell whether {distribution} {version} was released: {how}; {fix}")
    if by_tag is not None and by_index is not None and by_tag != by_index:
        raise ReleasedError(f"was {distribution} {version} released? {how}; {fix}")
    return Released(version, bool(by_index if by_index is not None else by_tag), how, first)


def judged_as_of(project: Project, version: str, index: Index | None) -> tuple[datetime.datetime | None, str]:
    """When a release at ``version`` is judged (``None``: now), and why, the same with or without tags.

    HEAD is ``version``'s tag: the earlier of the tag's date and its commit's (:meth:`Project.tag_time`).
    Otherwise the index says when ``version`` was first uploaded; HEAD committed at or before that moment is
    the release commit (CI's tagless clone of a tag push), judged as of its commit, as the tag would have it.
    A checkout with release tags but not this one, whose HEAD is such a commit, is refused: its tags are stale.
    """
    tag = project.release.tag_for(version)
    tagged = project.tag_time(tag)
    if tagged is not None:
        return tagged, f"HEAD is the tag {tag}: the index as of the tag (the earlier of its date and its commit's)"
    if index is None or project.sdist is not None or not project.is_git:
        return None, ""
    committed = project.git("show", "-s", "--format=%cI", "HEAD").stdout.strip()
    try:
        head = parse_time(committed)
        held, first = on_index(index, project.release.lead().distribution, version)
    except (ValueError, IndexClientError):
        return None, ""  # no commit to date, or no index: judged now (the plan reports an unreachable index)
    if not held or first is None or head > first:
        return None, ""  # not released, or HEAD came after the release: today's index
    if tag_witness(project, version) is False:
        raise ReleasedError(f"HEAD ({head:%Y-%m-%dT%H:%M:%SZ}) predates {version}'s first upload but the tag {tag} is "
                            f"not among this checkout's release tags: fetch them (git fetch --tags), or give --as-of")
    return head, (f"HEAD's commit predates {version}'s first upload ({first:%Y-%m-%dT%H:%M:%SZ}), as a release "
                  f"commit does: the index as of the commit (the checkout has no tag {tag})")
