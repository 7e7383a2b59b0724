"""How `converge up` is started: a busy port or unusable data directory found before anything
starts, and the "what next" lines of its banner. Real sockets and directories; nothing faked."""

from __future__ import annotations

import argparse
import os
import socket
from contextlib import closing
from pathlib import Path

import pytest

from services.cli.launch import data_dir_problem, listen_problem, next_steps, with_options
from shared.settings import UpSettings


def test_a_port_in_use_is_named_with_how_to_choose_another() -> None:
    with closing(socket.socket()) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert listen_problem("127.0.0.1", port) == (
            f"port {port} on 127.0.0.1 is in use; stop what holds it, or choose another port "
            "with --port (or CONVERGE_API_PORT)"
        )
    assert listen_problem("127.0.0.1", port) is None, "free once released"
    elsewhere = listen_problem("192.0.2.1", 8004)  # TEST-NET-1: no interface of this machine has it
    assert elsewhere is not None
    assert elsewhere.startswith("cannot listen on 192.0.2.1:8004: ")


def test_an_unusable_data_directory_is_named(tmp_path: Path) -> None:
    assert data_dir_problem(tmp_path / "new" / "data") is None
    assert (tmp_path / "new" / "data").is_dir()
    blocker = tmp_path / "file"
    blocker.write_text("")
    problem = data_dir_problem(blocker / "data")
    assert problem is not None
    assert problem.startswith(f"cannot create the data directory {blocker / 'data'}: ")


def test_options_win_over_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CONVERGE_API_PORT", "9001")
    settings = UpSettings()
    assert with_options(settings, argparse.Namespace(port=None, data_dir=None)).api_port == 9001
    chosen = with_options(settings, argparse.Namespace(port=9002, data_dir=tmp_path))
    assert (chosen.api_port, chosen.data_dir) == (9002, tmp_path)


def test_the_next_steps_activate_the_virtualenv_the_cli_runs_from(tmp_path: Path) -> None:
    url, token = "http://127.0.0.1:9003", "Tok3n"
    inside = next_steps(url, token, prefix=str(tmp_path / ".venv"), cwd=tmp_path)
    assert inside == [
        ". .venv/bin/activate",
        f"export CONVERGE_URL={url} CONVERGE_TOKEN={token}",
        "converge stack list",
    ]
    elsewhere = next_steps(url, token, prefix="/opt/converge/venv", cwd=tmp_path)
    assert elsewhere[0] == ". /opt/converge/venv/bin/activate"
    assert os.path.isabs(elsewhere[0].split()[1])
