"""Which Chromium the browser tests drive, if this machine has one.

The dashboard's tests drive a real Chromium through Playwright (never a
browser Playwright downloads). CONVERGE_TEST_CHROMIUM names one; otherwise
Debian's `/usr/bin/chromium`, a `chromium` / `chromium-browser` /
`google-chrome` on PATH, or the macOS application. Without one the browser
tests are skipped, and `make test` ends with `MISSING` saying how to get one.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

DEBIAN = "/usr/bin/chromium"
MACOS = (
    "/Applications/Chromium.app/Contents/MacOS/Chromium",
    "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
)
MISSING = (
    "browser tests skipped: no Chromium found; install it (Debian/Ubuntu: `sudo apt-get install "
    "chromium`, or `sudo make browser`; macOS: `brew install --cask chromium`) or set "
    "CONVERGE_TEST_CHROMIUM=/path/to/chromium"
)


def find_chromium() -> str | None:
    given = os.environ.get("CONVERGE_TEST_CHROMIUM")
    if given:
        return given
    for candidate in (DEBIAN, *MACOS):
        if os.access(candidate, os.X_OK) and Path(candidate).is_file():
            return candidate
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    return None
