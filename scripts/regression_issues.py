"""One GitHub issue per compat regression: open once bisected, edit as nights pass, close after M green nights.

Usage (the nightly's ``issues`` job; ``gh`` authenticated by ``GH_TOKEN``)::

    jaxrel history regressions --db STORE --json --close-after 3 > regressions.json
    python scripts/regression_issues.py regressions.json --repo OWNER/NAME [--hud-url URL] [--dry-run]

What to do comes from :func:`jaxrel.history.alerts.plan` (no I/O, tested); this script only lists the
issues labelled ``compat-regression`` and carries the plan out with ``gh issue create/edit/close``.
``--dry-run`` prints the plan instead. Exit 0 done, 2 a bad regressions file, 3 ``gh`` failed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from jaxrel.history.alerts import Action, Issue, plan
from jaxrel.history.publish import COMMIT_URL

LABEL = "compat-regression"
FIELDS = {"key": str, "cell": str, "night": str, "state": str, "ready": bool, "tests": list, "page": str,
          "last_good": str, "first_bad": str, "last_red": str, "green_nights": int}
TIMEOUT = 120  # seconds for one gh call


def _regressions(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
        found = data["regressions"]
        assert isinstance(found, list)
        for item in found:
            for name, kind in FIELDS.items():
                assert isinstance(item.get(name), kind), name
    except (OSError, ValueError, KeyError, TypeError, AssertionError) as error:
        print(f"regression_issues: {path}: not the output of jaxrel history regressions --json ({error}); "
              "regenerate it", file=sys.stderr)
        raise SystemExit(2) from None
    return found


def _gh(*args: str, text: str | None = None) -> str:
    try:
        done = subprocess.run(["gh", *args], input=text, capture_output=True, text=True, timeout=TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as error:
        print(f"regression_issues: gh {args[0]} {args[1]} failed ({error}); is gh installed and GH_TOKEN set?",
              file=sys.stderr)
        raise SystemExit(3) from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        print(f"regression_issues: gh {args[0]} {args[1]} failed: {last}", file=sys.stderr)
        raise SystemExit(3)
    return done.stdout


def _issues(repo: str) -> list[Issue]:
    listed = json.loads(_gh("issue", "list", "--repo", repo, "--label", LABEL, "--state", "all", "--limit", "1000",
                            "--json", "number,state,body"))
    return [Issue(int(i["number"]), str(i["state"]).lower(), str(i["body"] or "")) for i in listed]


def _carry_out(action: Action, repo: str) -> None:
    if action.verb == "open":
        _gh("issue", "create", "--repo", repo, "--title", action.title, "--label", LABEL, "--body-file", "-",
            text=action.body)
    elif action.verb == "edit":
        _gh("issue", "edit", str(action.number), "--repo", repo, "--title", action.title, "--body-file", "-",
            text=action.body)
    elif action.verb == "close":
        _gh("issue", "edit", str(action.number), "--repo", repo, "--body-file", "-", text=action.body)
        _gh("issue", "close", str(action.number), "--repo", repo, "--reason", "completed", "--comment",
            "Its tests have passed night after night since: closing (jaxrel history).")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("regressions", type=Path)
    parser.add_argument("--repo", required=True, metavar="OWNER/NAME")
    parser.add_argument("--commit-url", default=COMMIT_URL, metavar="PATTERN")
    parser.add_argument("--hud-url", default="", metavar="URL")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    found = _regressions(args.regressions)
    issues = [] if args.dry_run else _issues(args.repo)
    actions = plan(found, issues, args.commit_url, args.hud_url)
    for action in actions:
        print(f"{action.verb} {action.key}" + (f" (#{action.number})" if action.number else "") + f": {action.title}")
        if not args.dry_run:
            _carry_out(action, args.repo)
    if not actions:
        print("no issue to open, edit or close")
    return 0


if __name__ == "__main__":
    sys.exit(main())
