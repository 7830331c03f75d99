"""One line of evidence from the history for ``jaxrel verdict`` and ``jaxrel doctor`` (``--history FILE|URL``).

The source is a store file (asked directly), or a published site: a directory or an ``http(s)://`` URL whose
``api/v1/combos.json`` (written by ``jaxrel history publish``) lists every set of wheels with its verdict. A
URL's feed is fetched through jaxrel's transport (deadline, size cap, retries) and kept in jaxrel's cache; when
the site cannot be reached the cached copy answers, and the line says how old it is. The line never changes the
rule verdict or the exit code: the rules judge, the history testifies.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

from jaxrel._util import localfiles
from jaxrel._util.atomic import write_bytes_atomically
from jaxrel._util.files import cache_root
from jaxrel.distributions.transport import IndexClientError, Limits, fetch, request_for
from jaxrel.distributions.urls import parse_url
from jaxrel.errors import JaxrelError
from jaxrel.history.query import UNTESTED, WORST_FIRST, query
from jaxrel.history.store import HistoryError, open_store

__all__ = ["evidence_line"]

FEED = "api/v1/combos.json"
MAX_FEED = 256 << 20


def evidence_line(source: str, pins: dict[str, str], python: str | None = None) -> str:
    """``history: …`` for the set ``pins`` from ``source`` (see the module doc)."""
    if "://" not in source and Path(source).is_file():
        store = open_store(source, create=False)
        try:
            answer = query(store, pins, python)
        finally:
            store.close()
        if not answer.nights:
            nearest = f"; nearest tested: {' '.join(answer.nearest[0]['pins'])}" if answer.nearest else ""
            return f"history: {UNTESTED} in {source}{nearest}"
        last = answer.nights[-1]
        return (f"history: {answer.verdict} ({len(answer.nights)} nights, last {last['night']} in {last['cell']}: "
                f"{last['state']}{'; ' + answer.why if answer.why else ''}) in {source}")
    combos, note = _feed(source)
    wanted = set(f"{name}=={version}" for name, version in pins.items())
    matching = [c for c in combos if wanted <= set(c.get("pins", [])) and (python is None or c.get("python") == python)]
    if not matching:
        return f"history: {UNTESTED} in {source}{note}"
    verdicts = {str(c.get("verdict")) for c in matching}
    verdict = next((v for v in WORST_FIRST if v in verdicts), UNTESTED)
    nights = sum(int(c.get("nights", 0)) for c in matching)
    newest = max(str(c.get("last_night", "")) for c in matching)
    why = next((str(c["why"]) for c in matching if c.get("verdict") == verdict and c.get("why")), "")
    return (f"history: {verdict} ({nights} nights over {len(matching)} sets, last {newest}"
            f"{'; ' + why if why else ''}) in {source}{note}")


def _feed(source: str) -> tuple[list[dict[str, Any]], str]:
    """The feed's combos and a note on where they came from (a cached copy, and its age)."""
    if "://" not in source:
        path = Path(source) / FEED
        return _combos(localfiles.load_json(path, what="the history feed"), str(path)), ""
    url = parse_url(source.rstrip("/") + "/" + FEED, "--history").text
    cached = cache_root() / "history-feeds" / f"{hashlib.sha256(url.encode()).hexdigest()[:24]}.json"
    try:
        answer = fetch(request_for(url), limits=Limits.from_env(), max_bytes=MAX_FEED)
        if answer.status != 200:
            raise IndexClientError(f"{url}: HTTP {answer.status}; is it a site jaxrel history publish wrote?")
        combos = _combos(localfiles.loads_json(answer.body, url), url)
        write_bytes_atomically(cached, answer.body)
        return combos, ""
    except IndexClientError as error:
        try:
            data = localfiles.load_json(cached, what="the cached history feed")
        except JaxrelError:
            raise HistoryError(f"--history {source}: cannot be read ({str(error).split('; ')[0]}) and no copy is "
                               "cached; check the URL or the network", exit_code=error.exit_code) from None
        age = (time.time() - cached.stat().st_mtime) / 3600
        return _combos(data, str(cached)), f" (cached copy, {age:.0f} h old: {str(error).split('; ')[0]})"


def _combos(data: object, where: str) -> list[dict[str, Any]]:
    if not isinstance(data, dict) or data.get("api") != 1 or not isinstance(data.get("combos"), list):
        raise HistoryError(f"{where}: not a jaxrel history feed (api 1 with a combos list); point --history at a "
                           "store or at a site jaxrel history publish wrote")
    return [c for c in data["combos"] if isinstance(c, dict) and isinstance(c.get("pins"), list)]
