"""The package as a user installs it: an sdist and a wheel built by the build backend
(hatchling), the wheel installed into a fresh venv, ``kredenc --help`` and ``kredenc
demo`` run from it, offline.

The fresh venv has no ``--system-site-packages`` (that would also see the checkout's
editable kredenc); its dependencies are this venv's installed packages, every entry of
its site-packages but kredenc's own, linked into one folder a ``.pth`` adds after the
venv's own site-packages. So what runs is the wheel's code with the dependency versions
the tests ran with, and nothing is downloaded.

The backend comes from this interpreter (hatchling is in the ``dev`` extra) or from a
local wheelhouse named by ``KREDENC_WHEELHOUSE`` (``pip download hatchling -d DIR``
once, online); with neither the test is skipped and says so.
"""

from __future__ import annotations

import importlib.util
import os
import site
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
OWN = ("kredenc", "_editable_impl_kredenc", "__editable__")


def _run(*args: str | Path, env: dict[str, str] | None = None, cwd: Path = ROOT) -> str:
    done = subprocess.run(
        [str(a) for a in args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done.stdout


def _builder(tmp: Path) -> Path:
    """A Python that can ``import hatchling`` (this one, or a venv from the wheelhouse)."""
    if importlib.util.find_spec("hatchling") is not None:
        return Path(sys.executable)
    house = os.environ.get("KREDENC_WHEELHOUSE")
    if not house or not any(Path(house).glob("hatchling-*.whl")):
        pytest.skip(
            "hatchling is not installed and KREDENC_WHEELHOUSE names no folder holding its "
            "wheel: pip install -e '.[dev]' (or pip download hatchling -d DIR, once)"
        )
    venv = tmp / "build-venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-index",
         "--find-links", house, "hatchling")  # fmt: skip
    return python


def _dependencies(tmp: Path) -> Path:
    """This venv's site-packages without kredenc itself, as a folder of links."""
    (packages,) = [Path(p) for p in site.getsitepackages() if Path(p).is_dir()][:1]
    farm = tmp / "deps"
    farm.mkdir()
    for entry in packages.iterdir():
        if entry.name.startswith(OWN) or entry.suffix == ".pth":
            continue
        (farm / entry.name).symlink_to(entry)
    return farm


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("packaging")
    python = _builder(tmp)
    dist = tmp / "dist"
    env = os.environ | {"PIP_NO_INDEX": "1"}
    _run(python, "-m", "hatchling", "build", "-t", "sdist", "-t", "wheel", "-d", dist, env=env)
    (wheel,) = dist.glob("kredenc-*.whl")
    (sdist,) = dist.glob("kredenc-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist, "tmp": tmp, "python": python}


def test_the_sdist_holds_the_sources(built: dict[str, Path]) -> None:
    with tarfile.open(built["sdist"]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", "src/kredenc/engine.py"} <= names
    assert "src/kredenc/interfaces/server/app.py" in names


def test_the_sdist_builds_the_same_wheel(built: dict[str, Path]) -> None:
    """What a user building from the sdist gets: the same files as the wheel."""
    out = built["tmp"] / "from-sdist"
    _run(sys.executable, "-m", "pip", "--python", built["python"], "wheel", "-q", "--no-deps",
         "--no-build-isolation", "--no-index", "-w", out, built["sdist"])  # fmt: skip
    (again,) = out.glob("kredenc-*.whl")
    with zipfile.ZipFile(built["wheel"]) as a, zipfile.ZipFile(again) as b:
        assert sorted(a.namelist()) == sorted(b.namelist())


def test_the_wheel_holds_the_package_and_its_entry_points(built: dict[str, Path]) -> None:
    with zipfile.ZipFile(built["wheel"]) as whl:
        names = set(whl.namelist())
        (points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_points = whl.read(points).decode()
    assert "kredenc/engine.py" in names
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)
    assert "kredenc = kredenc.interfaces.cli:main" in entry_points
    assert "[kredenc.loaders]" in entry_points


def test_the_wheel_installs_and_runs_offline(built: dict[str, Path]) -> None:
    tmp = built["tmp"]
    venv = tmp / "fresh"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps",
         "--no-index", built["wheel"])  # fmt: skip
    own = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    (Path(own.strip()) / "_kredenc_deps.pth").write_text(f"{_dependencies(tmp)}\n")
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp / "home"),
        "HF_HUB_OFFLINE": "1",
        "NO_PROXY": "*",
        "LANG": "C.UTF-8",
    }
    where = _run(python, "-c", "import kredenc; print(kredenc.__file__)", env=env, cwd=tmp)
    assert where.strip().startswith(str(venv)), where
    assert "Usage" in _run(venv / "bin" / "kredenc", "--help", env=env, cwd=tmp)
    out = _run(venv / "bin" / "kredenc", "--store", tmp / "store", "demo", env=env, cwd=tmp)
    assert "kredenc demo: steps" in out and "20 records" in out
