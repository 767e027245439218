"""The lean install: the library and the simulator import no web or cluster code, a command that needs a
missing extra says which one, and the sdist and the wheel built from it install with their bundled data."""

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import purebandits._extras as extras
from purebandits.cli import main

ROOT = Path(__file__).resolve().parents[1]

#: top-level modules of the service, Dask and plot extras that a library user must not pay for
HEAVY = ("fastapi", "starlette", "sqlalchemy", "alembic", "uvicorn", "jinja2", "dask", "distributed", "bokeh",
         "matplotlib")


def _run_python(code: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, **kw)


@pytest.mark.slow  # fresh interpreters
def test_library_and_simulator_import_no_web_or_cluster_stack():
    code = (
        "import sys\n"
        "import purebandits, purebandits.algorithms, purebandits.registry, purebandits.instances\n"
        "from purebandits import LilUCB, Learner\n"
        "from purebandits.simulate import simulate\n"
        "import purebandits.simulate.engine, purebandits.simulate.executors, purebandits.simulate.cli\n"
        "import purebandits.experiments.base, purebandits.cli\n"
        "purebandits.cli.build_parser()  # every sub-command's parser, serve's included\n"
        f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    r = _run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", f"importing the library loaded: {r.stdout.strip()}"


def _without(monkeypatch, *modules: str) -> None:
    """Make ``require_extra`` see ``modules`` as not installed."""
    real = extras._installed
    monkeypatch.setattr(extras, "_installed", lambda m: m not in modules and real(m))


def test_serve_without_the_service_extra_names_it(monkeypatch, capsys, tmp_path):
    _without(monkeypatch, "fastapi")
    assert main(["serve", "--demo", "--db", f"sqlite:///{tmp_path / 'x.sqlite'}"]) == 1
    err = capsys.readouterr().err
    assert "purebandits serve needs the service extra: pip install 'purebandits[service]'" in err
    assert "fastapi" in err
    assert not (tmp_path / "x.sqlite").exists()  # refused before anything was created


def test_experiment_token_without_the_service_extra_names_it(monkeypatch, capsys):
    _without(monkeypatch, "sqlalchemy")
    assert main(["experiment", "token", "1"]) == 1
    assert "purebandits experiment token needs the service extra" in capsys.readouterr().err


def test_simulate_plot_without_the_plot_extra_is_refused_before_the_run(monkeypatch, capsys, tmp_path):
    _without(monkeypatch, "matplotlib")
    out = tmp_path / "r.csv"
    code = main(["simulate", "--algorithm", "uniform_allocation", "--instance", "custom:means=0.9/0.5", "--reps", "1",
                 "--max-pulls", "10", "--checkpoints", "5,10", "--out", str(out), "--plot", str(tmp_path / "c.png"),
                 "--no-progress"])
    assert code == 1
    err = capsys.readouterr().err
    assert "purebandits simulate --plot needs the plot extra: pip install 'purebandits[plot]'" in err
    assert not out.exists()


def test_dask_executor_without_the_dask_extra_names_it(monkeypatch):
    from purebandits.simulate.executors import get_executor

    _without(monkeypatch, "distributed")
    with pytest.raises(extras.MissingExtraError, match=r"needs the dask extra: pip install 'purebandits\[dask\]'"):
        get_executor("dask://127.0.0.1:1")


@pytest.mark.slow  # fresh interpreters
def test_reproduce_without_the_plot_extra_lists_but_does_not_run():
    # a fresh interpreter: the runner is imported once, and only by what needs it
    code = (
        "import purebandits._extras as e\n"
        "real = e._installed\n"
        "e._installed = lambda m: m != 'matplotlib' and real(m)\n"
        "from purebandits.cli import main\n"
        "assert main(['reproduce', '--list']) == 0\n"
        "raise SystemExit(main(['reproduce', 'zcl14_fig1', '--scale', 'quick']))\n"
    )
    r = _run_python(code)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "zcl14_fig1" in r.stdout
    assert "purebandits reproduce (every experiment draws its figure) needs the plot extra" in r.stderr


def _copy_source(dest: Path) -> Path:
    """The files a build reads, without caches or an editable install's metadata (the build writes nothing into
    the checkout that other tests run from)."""
    import shutil

    src = dest / "purebandits-src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "src", src / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "*.sqlite*"))
    return src


BUNDLED = ("purebandits/data/caption_contest/559_summary_RandomSamping.csv", "purebandits/data/rte/rte_workers.csv",
           "purebandits/service/templates/rate.html", "purebandits/service/static/rate.js",
           "purebandits/service/migrations/env.py", "purebandits/service/migrations/versions/0001_initial.py",
           "purebandits/service/migrations/script.py.mako", "purebandits/py.typed")

CHECK = """
import sys
from importlib import resources
from pathlib import Path
import purebandits
assert Path(purebandits.__file__).is_relative_to(sys.prefix), purebandits.__file__  # the installed copy
from purebandits.instances import make_instance
inst = make_instance("caption:559")
pkg = resources.files("purebandits")
for rel in {bundled!r}:
    assert pkg.joinpath(*rel.split("/")[1:]).is_file(), rel
print(inst.n_arms)
"""


@pytest.mark.packaging
def test_sdist_and_wheel_install_in_a_fresh_venv_with_bundled_data(tmp_path):
    pytest.importorskip("build", reason="the packaging check needs the dev extra's build, setuptools and wheel")
    pytest.importorskip("setuptools")
    pytest.importorskip("wheel")
    src = _copy_source(tmp_path)
    dist = tmp_path / "dist"
    # no isolation: the build tools come from this environment, so nothing is downloaded; without --sdist/--wheel,
    # build makes the sdist and then the wheel from the unpacked sdist, so the wheel's contents prove the sdist's
    r = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (sdist,) = dist.glob("purebandits-*.tar.gz")
    (wheel,) = dist.glob("purebandits-*.whl")
    with tarfile.open(sdist) as tf:
        in_sdist = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    with zipfile.ZipFile(wheel) as zf:
        in_wheel = set(zf.namelist())
    for rel in BUNDLED:
        assert f"src/{rel}" in in_sdist, f"{rel} missing from the sdist"
        assert rel in in_wheel, f"{rel} missing from the wheel"

    # a fresh venv that installs the wheel alone and borrows the dependencies from this environment (a path
    # line in a .pth file: read after the venv's own site-packages, so the installed copy is the one imported)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    borrowed = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]  # not a checkout's src
    (purelib / "zz_borrowed_dependencies.pth").write_text("\n".join(borrowed) + "\n")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
                        "--quiet", str(wheel)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([str(py), "-c", CHECK.format(bundled=BUNDLED)], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "138"  # contest 559's captions
    r = subprocess.run([str(venv / "bin" / "purebandits"), "algorithms"], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert "kl_rand_lucb" in r.stdout
