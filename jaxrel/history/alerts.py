"""One issue per regression, as the nightly keeps them: what to open, edit and close (no I/O here).

:func:`plan` takes the regressions (``jaxrel history regressions --json``) and the tracker's issues
that carry jaxrel's marker, and says what to do: **open** an issue for an open regression once it is
ready (bisected, converged or not, or with nothing for bisect to do), **edit** one whose text changed
(a later night, a culprit found), and **close** one whose regression closed (its tests green
``close_after`` nights in a row). An issue a person closed stays closed: the next break is a new
regression with an issue of its own. ``scripts/regression_issues.py``
carries the plan out with ``gh``. The marker (an HTML comment holding the regression's key) ties an
issue to its regression across nights whatever its title becomes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["MARKER", "Action", "Issue", "body", "plan", "title"]

MARKER = "<!-- jaxrel-regression: {key} -->"
_MARKED = re.compile(r"<!-- jaxrel-regression: (\S+) -->")


@dataclass(frozen=True)
class Issue:
    number: int
    state: str  # open | closed
    body: str

    @property
    def key(self) -> str | None:
        found = _MARKED.search(self.body)
        return found.group(1) if found else None


@dataclass(frozen=True)
class Action:
    verb: str  # open | edit | close
    key: str
    number: int | None  # the issue (None for open)
    title: str
    body: str


def title(regression: dict[str, Any]) -> str:
    culprit = regression.get("culprit")
    return (f"compat regression: {regression['cell']} since {regression['night']}"
            + (f" (culprit {str(culprit)[:12]})" if culprit else ""))


def body(regression: dict[str, Any], commit_url: str, hud_url: str = "") -> str:
    """The issue's text: what broke, where, since when, who, and how to reproduce it."""
    def link(commit: str) -> str:
        return f"[`{commit[:12]}`]({commit_url.format(commit=commit)})" if commit else "none kept"

    tests = regression["tests"][:20]
    more = len(regression["tests"]) - len(tests)
    culprit = (link(regression["culprit"]) if regression.get("culprit") else
               "bisect did not converge" if regression.get("bisected") else "not bisected (no frontend test failed)")
    lines = [MARKER.format(key=regression["key"]),
             f"**{regression['cell']}** ({regression.get('backend') or 'its backend'}) regressed on "
             f"{regression['night']}.", "",
             (f"- state: retired on {regression['retired']} ({regression['retired_why']})"
              if regression["state"] == "retired" else
              f"- state: {regression['state']} (last red {regression['last_red']}, "
              f"{regression['green_nights']} green nights since)"),
             f"- last good: {link(regression['last_good'])} ({regression.get('last_good_night') or '–'}); "
             f"first bad: {link(regression['first_bad'])}",
             f"- culprit: {culprit}",
             f"- error: `{regression.get('signature') or '–'}`", "", "Failing tests:", "",
             *(f"- `{test}`" for test in tests), *([f"- … and {more} more"] if more else []), "", "Reproduce:", ""]
    for what, command in regression.get("commands", {}).items():
        lines += [f"{what}:", "```console", f"$ {command}", "```"]
    if hud_url:
        lines += ["", f"On the HUD: {hud_url.rstrip('/')}/regressions/{regression['page']}"]
    return "\n".join(lines) + "\n"


def plan(regressions: list[dict[str, Any]], issues: list[Issue], commit_url: str, hud_url: str = "") -> list[Action]:
    """What to do on the tracker tonight (see the module doc)."""
    by_key: dict[str, Issue] = {}
    for kept in sorted(issues, key=lambda i: i.number):
        if kept.key is not None:
            by_key.setdefault(kept.key, kept)  # the oldest issue of a key is the one kept
    actions = []
    for regression in regressions:
        key, issue = regression["key"], by_key.get(regression["key"])
        text, name = body(regression, commit_url, hud_url), title(regression)
        if issue is None:
            if regression["state"] == "open" and regression["ready"]:
                actions.append(Action("open", key, None, name, text))
        elif regression["state"] in ("closed", "retired") and issue.state == "open":
            actions.append(Action("close", key, issue.number, name, text))
        elif issue.state == "open" and issue.body.strip() != text.strip():
            actions.append(Action("edit", key, issue.number, name, text))
    return actions
