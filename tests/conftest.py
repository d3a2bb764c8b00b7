"""Shared fixtures. The whole test session runs without network: any socket connection to a
non-loopback address fails loudly (tests/test_no_network.py proves the guard works)."""

from __future__ import annotations

import os
import socket
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis times every example (200 ms by default) and its drawing of data on the wall clock, and
# fails a test whose example ran past it: on a loaded CI machine (load ~16 on 2 cores) a stall is not
# a fault of the code under test. What a property test asserts stays; how long it took is not one of
# them (benches in bench/ measure time). Tests that set their own `settings` inherit these.
settings.register_profile("pinakes", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("pinakes")

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = REPO_ROOT.parent / "shared"


class NetworkBlockedError(RuntimeError):
    pass


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_local(address: object) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX
        return True
    if isinstance(address, tuple) and address:
        host = str(cast("tuple[object, ...]", address)[0])
        return host in ("localhost", "::1") or host.startswith("127.")
    return False


def _guarded_connect(self: socket.socket, address: object) -> None:
    if not _is_local(address):
        raise NetworkBlockedError(f"tests may not touch the network (connect to {address!r})")
    return _real_connect(self, address)  # pyright: ignore[reportArgumentType]  # the caller's own address, unchanged


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    if not _is_local(address):
        raise NetworkBlockedError(f"tests may not touch the network (connect to {address!r})")
    return _real_connect_ex(self, address)  # pyright: ignore[reportArgumentType]  # the caller's own address, unchanged


def pytest_sessionstart(session: pytest.Session) -> None:
    socket.socket.connect = _guarded_connect
    socket.socket.connect_ex = _guarded_connect_ex
    # Model libraries must never try a hub download from a test.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("PNK_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the real HF cache or home directory."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HF_HOME", str(home / "hf"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))


# A test that spends through the real clock and then reads the day's budget window (UTC days, the
# [budget] default) would find the spend in yesterday's window if the two straddled 00:00 (the CI run
# of 2026-12-06 ran 23:32-00:07). Such tests take seconds: one starting this close to midnight waits
# for the new day instead.
_LAST_SECONDS_OF_THE_DAY = 20.0


@pytest.fixture(autouse=True)
def _not_across_midnight() -> None:
    now = datetime.now(UTC)
    midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), UTC)
    left = (midnight - now).total_seconds()
    if left < _LAST_SECONDS_OF_THE_DAY:
        time.sleep(left + 0.5)


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED_DIR.is_dir():
        pytest.skip(f"../shared is not present beside the repository ({SHARED_DIR})")
    return SHARED_DIR
