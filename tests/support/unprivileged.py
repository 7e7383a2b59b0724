"""A newcomer's checkout for tests: a copy of this repository owned by an unprivileged user
with no Chromium, and a way to run commands as that user.

When the tests run as root (CI), the user is `nobody` (setpriv drops every
privilege), and each command runs in a private mount namespace in which every
Chromium this machine has is covered by /dev/null, so nothing can use or find
one; as any other user, the user is the one running the tests. HOME is a
directory of the user's own; PATH is the system's (no root-only tools).

The copy is what `git` would check out (tracked and new files, with their
modification times), plus a `.venv` made as `make install` would leave it,
without downloading again: a virtual environment of a Python the user may run
that sees the packages this test run has, with the copy on its path (as
`make install`'s editable install puts it) and the copy's console scripts,
stamped `.installed`. `make up` in the copy then only starts `converge up`, as
it does after a first install.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.browser import DEBIAN, MACOS

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class Newcomer:
    home: Path
    checkout: Path
    hidden: tuple[str, ...]  # the Chromium binaries covered, when running as root

    def command(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        """`argv` as this user would run it: own HOME, system PATH, no Chromium."""
        environment = {"HOME": str(self.home), "PATH": SYSTEM_PATH, "LANG": "C.UTF-8", **(env or {})}
        plain = ["env", "-i", *(f"{k}={v}" for k, v in environment.items()), *argv]
        if os.geteuid() != 0:
            return plain
        drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", *plain]
        covers = "".join(f'mount --bind /dev/null "{path}" && ' for path in self.hidden)
        return ["unshare", "--mount", "--", "sh", "-c", f'{covers}exec "$@"', "sh", *drop]


def chromium_binaries() -> tuple[str, ...]:
    found = [path for path in (DEBIAN, *MACOS) if Path(path).is_file()]
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if (path := shutil.which(name)) is not None:
            found.append(os.path.realpath(path))
    return tuple(dict.fromkeys(found))


@contextmanager
def newcomer() -> Iterator[Newcomer]:
    """A fresh checkout and home for the unprivileged user (removed afterwards)."""
    # Not under pytest's tmp_path: its parent is private to the user running the tests.
    base = Path(tempfile.mkdtemp(prefix="converge-newcomer-"))
    try:
        home, checkout = base / "home", base / "converge"
        home.mkdir()
        copy_checkout(checkout)
        user = Newcomer(home, checkout, chromium_binaries() if os.geteuid() == 0 else ())
        make_venv(checkout / ".venv", user)
        if os.geteuid() == 0:
            subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(base)], check=True)
        base.chmod(0o755)
        yield user
    finally:
        shutil.rmtree(base, ignore_errors=True)


def copy_checkout(target: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def make_venv(venv: Path, user: Newcomer) -> None:
    """`.venv` as `make install` leaves it, from the packages this run already has."""
    python = usable_python(user)
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
    (packages,) = list((venv / "lib").glob("python3*/site-packages"))
    checkout = venv.parent
    # The copy first (the editable install's place), its example plugin, then this run's packages
    # (their own .pth files are not read from there: this run's editable paths do not leak in).
    paths = [checkout, checkout / "tests/plugins/converge_example_plugin", *site.getsitepackages()]
    (packages / "_converge_checkout.pth").write_text("".join(f"{p}\n" for p in paths))
    scripts = tomllib.loads((checkout / "pyproject.toml").read_text())["project"]["scripts"]
    for name, target in scripts.items():
        module, function = target.split(":")
        script = venv / "bin" / name
        venv_python = venv / "bin" / "python"
        # As pip writes them: guarded, since the template pool's forkserver imports the main
        # module again in each worker process.
        script.write_text(
            f"#!{venv_python}\nimport sys\nfrom {module} import {function}\n"
            f"if __name__ == '__main__':\n    sys.exit({function}())\n"
        )
        script.chmod(0o755)
    (venv / "bin" / ".installed").touch()  # newer than pyproject.toml: `make` installs nothing


def usable_python(user: Newcomer) -> str:
    """A Python of this run's version that the user may execute (a root-only pyenv is not)."""
    wanted = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [sys.executable, os.path.realpath(sys.executable)]
    candidates += [
        p for name in (f"python{wanted}", "python3") if (p := shutil.which(name, path=SYSTEM_PATH))
    ]
    check = (
        f"import sys; sys.path[:0] = {site.getsitepackages()!r}; import aiohttp, pydantic; "
        f"sys.exit(f'{{sys.version_info.major}}.{{sys.version_info.minor}}' != '{wanted}')"
    )
    for candidate in dict.fromkeys(candidates):
        if subprocess.run(user.command([candidate, "-c", check]), capture_output=True).returncode == 0:
            return candidate
    raise AssertionError(
        f"no Python {wanted} that the unprivileged user may run (tried {candidates}), or the user "
        f"cannot read this run's packages in {site.getsitepackages()}: every directory above them "
        "must be open to others (o+rx), as a normal checkout's is"
    )
