"""The index client on local PEP 503 / PEP 691 pages and wheelhouses (offline)."""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from pathlib import Path

import pytest
from packaging.tags import Tag

from jaxrel.distributions.index import Index, IndexClientError, IndexFile, parse_html, parse_json, sha256_of
from jaxrel.distributions.wheels import WheelError, inspect, verify_record
from jaxrel.family import jax_profile

HTML = f"""<!DOCTYPE html><html><body>
<a href="../../files/jaxlib-0.5.3-cp312-cp312-manylinux2014_x86_64.whl#sha256={"AB12" * 16}"
   data-requires-python="&gt;=3.10">x</a>
<a href="https://files.example/jaxlib-0.4.32-cp312-cp312-manylinux2014_x86_64.whl#sha256={"cd34" * 16}"
   data-yanked="broken wheels">y</a>
<a href="jaxlib-0.5.3.tar.gz">sdist, no hash</a>
<a href="not-a-distribution.txt">junk</a>
</body></html>"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXREL_CACHE_DIR", str(tmp_path / "cache"))


def test_pep503_html_page():
    files = parse_html(HTML, "file:///srv/simple/jaxlib/index.html", "local")
    assert [f.filename for f in files] == [
        "jaxlib-0.5.3-cp312-cp312-manylinux2014_x86_64.whl", "jaxlib-0.4.32-cp312-cp312-manylinux2014_x86_64.whl",
        "jaxlib-0.5.3.tar.gz"]
    first, yanked, sdist = files
    assert first.url == "file:///srv/files/jaxlib-0.5.3-cp312-cp312-manylinux2014_x86_64.whl"
    assert first.sha256 == "ab12" * 16 and first.requires_python == ">=3.10" and first.yanked is None
    assert yanked.yanked == "broken wheels"
    assert sdist.sha256 is None and not sdist.is_wheel and str(sdist.version) == "0.5.3"
    cp312 = [Tag("cp312", "cp312", "manylinux2014_x86_64")]
    assert first.installable("3.12", cp312) and not first.installable("3.9", cp312)
    assert not yanked.installable("3.12", cp312)


def test_pep691_json_page():
    page = {"meta": {"api-version": "1.1"}, "name": "jaxlib", "files": [
        {"filename": "jaxlib-0.6.2-cp311-cp311-manylinux2014_x86_64.whl", "url": "../../f/jaxlib.whl",
         "hashes": {"sha256": "ee" * 32}, "requires-python": ">=3.11", "yanked": False},
        {"filename": "jaxlib-0.6.1-cp311-cp311-manylinux2014_x86_64.whl", "url": "https://f/x.whl",
         "hashes": {}, "yanked": True},
    ]}
    current, old = parse_json(page, "https://index.example/simple/jaxlib/", "json")
    assert current.url == "https://index.example/f/jaxlib.whl" and current.sha256 == "ee" * 32
    assert current.requires_python == ">=3.11" and current.yanked is None
    assert old.yanked == "" and old.sha256 is None


def make_wheel(folder: Path, name: str = "demo", version: str = "1.0", files: dict[str, str] | None = None) -> Path:
    """A small valid wheel with a correct RECORD."""
    files = {f"{name}/__init__.py": "x = 1\n", **(files or {})}
    dist_info = f"{name}-{version}.dist-info"
    files[f"{dist_info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                      "Requires-Dist: numpy>=2\nRequires-Dist: jaxlib<=1.0,>=0.9\n"
                                      "Requires-Dist: rich; extra == \"fancy\"\nRequires-Python: >=3.11\n")
    files[f"{dist_info}/WHEEL"] = "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for member, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{member},sha256={digest},{len(text.encode())}")
    record.append(f"{dist_info}/RECORD,,")
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
        archive.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return path


def file_index(root: Path, wheel: Path, sha256: str) -> str:
    """A PEP 503 index on disk listing ``wheel`` with ``sha256``; returns its file:// URL."""
    project = root / "simple" / "demo"
    project.mkdir(parents=True)
    (root / "files").mkdir()
    (root / "files" / wheel.name).write_bytes(wheel.read_bytes())
    (project / "index.html").write_text(f'<a href="../../files/{wheel.name}#sha256={sha256}">{wheel.name}</a>')
    return (root / "simple").as_uri()


def test_file_index_download_is_verified(tmp_path):
    wheel = make_wheel(tmp_path)
    good = Index([file_index(tmp_path / "good", wheel, sha256_of(wheel))])
    listing = good.listing("Demo")
    assert [f.filename for f in listing.files] == [wheel.name]
    assert good.download(listing.files[0]).read_bytes() == wheel.read_bytes()
    assert good.listing("absent").files == []  # not on this index: empty, not an error

    bad = Index([file_index(tmp_path / "bad", wheel, "0" * 64)])
    with pytest.raises(IndexClientError, match=rf"{wheel.name}: sha256 .* does not match 0000.*tampered"):
        bad.download(bad.listing("demo").files[0])


def test_a_local_index_whose_folder_is_missing_is_ignored_with_one_warning(tmp_path):
    """As pip ("Location … is ignored: it is neither a file nor a directory") and uv do: the other sources still
    answer (tests/e2e/test_pip_parity.py asks pip and uv themselves)."""
    wheel = make_wheel(tmp_path)
    missing = (tmp_path / "missing" / "simple").as_uri()
    said: list[str] = []
    index = Index([missing, file_index(tmp_path / "good", wheel, sha256_of(wheel))], progress=said.append)
    assert [f.filename for f in index.listing("demo").files] == [wheel.name]
    assert index.listing("other").files == []
    assert said == [f"warning: index {missing} is ignored: {tmp_path / 'missing' / 'simple'} is not a directory "
                    "(pip ignores it too); fix pip's index configuration (pip config list)"]


def test_tampered_wheelhouse_copy_is_refused_naming_the_file(tmp_path):
    wheel = make_wheel(tmp_path)
    url = file_index(tmp_path / "index", wheel, sha256_of(wheel))
    house = tmp_path / "house"
    house.mkdir()
    copy = house / wheel.name
    copy.write_bytes(wheel.read_bytes())
    assert Index([url], [house]).listing("demo").files[0].url == copy.resolve().as_uri()  # a good copy is used
    data = bytearray(copy.read_bytes())
    data[len(data) // 2] ^= 0xFF
    copy.write_bytes(bytes(data))
    with pytest.raises(IndexClientError, match=rf"{copy}: sha256 .* differs .*altered"):
        Index([url], [house]).listing("demo")


def test_a_missing_find_links_folder_is_ignored_with_one_warning_and_kept_from_uv(tmp_path):
    wheel = make_wheel(tmp_path)
    house = tmp_path / "house"
    house.mkdir()
    (house / wheel.name).write_bytes(wheel.read_bytes())
    said: list[str] = []
    index = Index([], [tmp_path / "absent", house], progress=said.append)
    assert [f.filename for f in index.listing("demo").files] == [wheel.name]
    assert index.listing("demo").files and said == [
        f"warning: find-links {tmp_path / 'absent'} is ignored: not a directory (pip ignores it too); fix pip's "
        "index configuration (pip config list)"]
    assert index.pip_config().find_links == (str(house),)


def test_listing_cache_and_refresh(server, tmp_path):
    body = f'<a href="/f/demo-1.0.tar.gz#sha256={"0" * 64}">demo-1.0.tar.gz</a>'.encode()
    url = server.serve_page("cached", "text/html", body)
    cache = tmp_path / "cache"
    assert len(Index([url], cache=cache).listing("demo").files) == 1
    server.pages["cached"] = ("text/html", b"<html></html>")  # the index drops the file
    assert len(Index([url], cache=cache).listing("demo").files) == 1  # cached listing, within the TTL
    assert Index([url], cache=cache, refresh=True).listing("demo").files == []


def test_a_cached_listing_is_parsed_once_per_process_while_its_file_is_unchanged(server, tmp_path, monkeypatch):
    """A compat run asks for jaxlib's listing in every cell; its entry is parsed again only when it was rewritten
    (a refresh, another run) or damaged."""
    from jaxrel.distributions import listcache

    parsed: list[str] = []
    real = listcache.file_from_record
    monkeypatch.setattr(listcache, "file_from_record", lambda item, where: parsed.append(where) or real(item, where))
    body = f'<a href="/f/demo-1.0.tar.gz#sha256={"0" * 64}">demo-1.0.tar.gz</a>'.encode()
    url = server.serve_page("parsed-once", "text/html", body)
    cache = tmp_path / "cache"
    Index([url], cache=cache).listing("demo")  # fetched and written
    first = [f.filename for f in Index([url], cache=cache).listing("demo").files]
    again = Index([url], cache=cache).listing("demo")
    assert first == [f.filename for f in again.files] == ["demo-1.0.tar.gz"] and len(parsed) == 1
    again.files.clear()  # a caller's list is its own
    assert len(Index([url], cache=cache).listing("demo").files) == 1 and len(parsed) == 1

    server.pages["parsed-once"] = ("text/html", body.replace(b"1.0", b"2.0"))
    assert [f.filename for f in Index([url], cache=cache, refresh=True).listing("demo").files] == ["demo-2.0.tar.gz"]
    assert [f.filename for f in Index([url], cache=cache).listing("demo").files] == ["demo-2.0.tar.gz"]
    assert len(parsed) == 2, "the rewritten entry is parsed once"
    entry = next(cache.rglob("demo.json"))
    entry.write_text(entry.read_text().replace("2.0", "3.0.1"))  # the same inode, written in place
    assert [f.filename for f in Index([url], cache=cache).listing("demo").files] == ["demo-3.0.1.tar.gz"]
    entry.write_text("{damaged")
    server.pages["parsed-once"] = ("text/html", body)
    assert [f.filename for f in Index([url], cache=cache).listing("demo").files] == ["demo-1.0.tar.gz"]


def test_a_local_index_is_read_afresh_every_time(tmp_path):
    """A ``file://`` index is not kept an hour: a wheel added to it is seen at once, as pip and uv see it."""
    wheel = make_wheel(tmp_path)
    url = file_index(tmp_path / "index", wheel, sha256_of(wheel))
    cache = tmp_path / "cache"
    assert len(Index([url], cache=cache).listing("demo").files) == 1
    page = tmp_path / "index" / "simple" / "demo" / "index.html"
    page.write_text("<html></html>")  # the index drops the file
    assert Index([url], cache=cache).listing("demo").files == []
    assert not cache.exists() or not any(cache.rglob("*.json")), "nothing of a local index is cached"


def test_wheel_inspection_and_cache(tmp_path):
    family = jax_profile()
    wheel = make_wheel(tmp_path, "jax", "0.9.9", {"jax/version.py": '_minimum_jaxlib_version = "0.9.1"\n'})
    info = inspect(wheel, family)
    assert (info.name, info.version, info.kind, info.tags) == ("jax", "0.9.9", "wheel", ["py3-none-any"])
    assert info.minimum_backend == "0.9.1" and info.requires_python == ">=3.11"
    assert str(info.requirements_on("jaxlib")) == "<=1.0,>=0.9"
    assert info.plain_requirements({"jax", "jaxlib"}) == ["numpy>=2"]
    cached = Path(str(tmp_path / "cache" / "inspect")).glob(f"{info.sha256}-*.json")
    assert json.loads(next(cached).read_text())["minimum_backend"] == "0.9.1"
    assert verify_record(wheel) == 5  # __init__, version, METADATA, WHEEL, RECORD


def test_tampered_wheel_member_is_refused(tmp_path):
    wheel = make_wheel(tmp_path, "jax", "0.9.9", {"jax/version.py": '_minimum_jaxlib_version = "0.9.1"\n'})
    altered = tmp_path / "altered" / wheel.name
    altered.parent.mkdir()
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(altered, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            target.writestr(item, data.replace(b"0.9.1", b"0.1.0") if item.filename == "jax/version.py" else data)
    with pytest.raises(WheelError, match="jax/version.py does not match its RECORD"):
        inspect(altered, jax_profile())
    with pytest.raises(WheelError, match="not a readable wheel"):
        (tmp_path / "junk.whl").write_bytes(b"not a zip")
        inspect(tmp_path / "junk.whl", jax_profile())


def test_index_file_without_hash_is_not_downloaded():
    file = IndexFile("demo-1.0-py3-none-any.whl", "https://index.example/demo.whl", "somewhere")
    with pytest.raises(IndexClientError, match="lists no sha256"):
        Index([]).download(file)


def test_a_wheelhouse_with_a_dotfile_lists_its_wheels_as_pip_does(tmp_path):
    """`uv build --out-dir DIR` writes a .gitignore into DIR; a wheelhouse made that way was refused ("the index is
    broken"). pip's --find-links skips it, and so does jaxrel now (asked of pip itself)."""
    import subprocess

    from jaxrel.distributions.pipconfig import pip_command

    wheel = make_wheel(tmp_path)
    house = tmp_path / "house"
    house.mkdir()
    (house / wheel.name).write_bytes(wheel.read_bytes())
    (house / ".gitignore").write_text("*\n")
    assert [f.filename for f in Index([], [house]).listing("demo").files] == [wheel.name]
    done = subprocess.run([*pip_command(), "download", "--no-index", "--no-deps", "--find-links", str(house),
                           "--dest", str(tmp_path / "got"), "demo"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [p.name for p in (tmp_path / "got").iterdir()] == [wheel.name]
