"""systemd units: verify prints nothing, install writes the right paths and says what to run next."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from supervisor.service.install import (
    TEMPLATES,
    InstallError,
    install_unit,
    install_unit_details,
    render_unit,
    unit_path,
)

REPO = Path(__file__).resolve().parents[2]
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed")


def _exe() -> Path:
    venv_script = Path(sys.executable).parent / "shepherd"
    return venv_script if venv_script.exists() else Path(sys.executable)


def _analyze(args: list[str], unit: Path, user: bool, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    assert SYSTEMD_ANALYZE is not None
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="xdg-") as short:
        if user:
            # A short folder of its own: the user units' socket paths under it must fit in sun_path (108
            # bytes), which pytest's tmp_path under an xdist worker does not.
            env["XDG_RUNTIME_DIR"] = short
        cmd = [SYSTEMD_ANALYZE, *(["--user"] if user else []), *args, str(unit)]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60, check=False)


def _write(tmp_path: Path, sub: str, text: str) -> Path:
    folder = tmp_path / sub
    folder.mkdir()
    unit = folder / "shepherd.service"
    unit.write_text(text)
    return unit


def _render(kind: str, tmp_path: Path) -> str:
    return render_unit(
        kind,  # type: ignore[arg-type]
        _exe(),
        tmp_path / "state root",  # a space, to prove quoting
        env_file=tmp_path / "shepherd.env",
        user="shepherd-svc" if kind == "system" else None,
        sbatch=Path("/opt/slurm/bin/sbatch"),
        extra_env={"SLURM_CONF": "/etc/slurm/slurm.conf"},
    )


@needs_analyze
@pytest.mark.parametrize("kind", ["user", "system"])
def test_systemd_analyze_verify_prints_nothing_for_the_rendered_unit(kind: str, tmp_path: Path) -> None:
    unit = _write(tmp_path, kind, _render(kind, tmp_path))
    result = _analyze(["verify"], unit, user=kind == "user", tmp_path=tmp_path)
    assert result.returncode == 0
    assert result.stdout + result.stderr == ""  # verify only *warns*: any output is a failure


@needs_analyze
def test_verify_would_catch_a_bad_key(tmp_path: Path) -> None:
    """Guards the test above: the check really sees warnings."""
    unit = _write(tmp_path, "bad", _render("system", tmp_path).replace("KillMode=mixed", "KillMode=gentle"))
    result = _analyze(["verify"], unit, user=False, tmp_path=tmp_path)
    assert "gentle" in result.stdout + result.stderr


@needs_analyze
@pytest.mark.parametrize(("kind", "at_most"), [("system", 2.5), ("user", 7.0)])
def test_security_exposure_stays_low(kind: str, at_most: float, tmp_path: Path) -> None:
    unit = _write(tmp_path, kind, _render(kind, tmp_path))
    result = _analyze(["security", "--offline=yes"], unit, user=kind == "user", tmp_path=tmp_path)
    m = re.search(r"Overall exposure level for shepherd\.service: ([0-9.]+)", result.stdout)
    assert m is not None, result.stdout + result.stderr
    assert float(m.group(1)) <= at_most


@pytest.mark.parametrize(
    ("kind", "file"), [("user", "shepherd.service"), ("system", "shepherd-system.service")]
)
def test_repository_templates_match_what_install_writes(kind: str, file: str) -> None:
    assert (REPO / "systemd" / file).read_text() == TEMPLATES[kind]  # type: ignore[index]


def test_rendered_unit_has_the_service_contract(tmp_path: Path) -> None:
    text = _render("system", tmp_path)
    for line in [
        "Type=notify",
        "NotifyAccess=main",
        "WatchdogSec=60",
        "Restart=on-failure",
        "KillMode=mixed",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "StartLimitBurst=5",
        "User=shepherd-svc",
        "ProtectSystem=strict",
        f'ReadWritePaths="{tmp_path}/state root"',
        'Environment="SLURM_CONF=/etc/slurm/slurm.conf"',
        f"EnvironmentFile={tmp_path}/shepherd.env",
    ]:
        assert line in text.splitlines(), line
    assert f'{_exe()} --root "{tmp_path}/state root" daemon' in text
    assert re.search(r"@[A-Z_]+@", text) is None  # no placeholder left
    path_line = next(x for x in text.splitlines() if x.startswith('Environment="PATH='))
    assert path_line.split("=", 2)[2].split(":")[:2] == [str(_exe().parent), "/opt/slurm/bin"]


def test_user_unit_has_no_filesystem_namespacing_and_no_user(tmp_path: Path) -> None:
    text = _render("user", tmp_path)
    settings = [x.split("=")[0] for x in text.splitlines() if x and not x.startswith("#")]
    for absent in ("User", "ProtectSystem", "PrivateTmp", "PrivateUsers", "ProtectHome"):
        assert absent not in settings


def test_render_refuses_what_a_unit_cannot_express(tmp_path: Path) -> None:
    with pytest.raises(InstallError):
        render_unit("system", _exe(), tmp_path, None, None)  # system unit without an account
    with pytest.raises(InstallError):
        render_unit("user", Path("relative/shepherd"), tmp_path)
    with pytest.raises(InstallError):
        render_unit("user", _exe(), tmp_path / 'quote"d')


def test_percent_and_dollar_in_paths_are_escaped(tmp_path: Path) -> None:
    text = render_unit("user", _exe(), Path("/data/100%/$HOME"))
    assert "--root /data/100%%/$$HOME daemon" in text


def test_install_writes_the_user_unit_under_home_and_prints_the_steps(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "SLURM_CONF": "/etc/slurm/slurm.conf"}
    details = install_unit_details("user", Path("~/ignored").parent / tmp_path / "root", exe=_exe(), env=env)
    assert details.path == home / ".config" / "systemd" / "user" / "shepherd.service"
    written = details.path.read_text()
    assert written == details.text
    assert f"ExecStart={_exe()} --root {tmp_path}/root daemon --log-format auto" in written
    assert 'Environment="SLURM_CONF=/etc/slurm/slurm.conf"' in written
    steps = details.instructions
    assert "systemctl --user daemon-reload && systemctl --user enable --now shepherd" in steps
    assert "loginctl enable-linger " in steps
    assert str(details.path) in steps


def test_install_unit_returns_the_text_to_print(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "PATH": "/usr/bin"}
    out = install_unit("user", tmp_path / "root", exe=_exe(), env=env, user="alice")
    assert (tmp_path / "cfg" / "systemd" / "user" / "shepherd.service").exists()
    assert "loginctl enable-linger alice" in out


def test_system_install_targets_etc_and_prints_system_steps(tmp_path: Path) -> None:
    assert unit_path("system") == Path("/etc/systemd/system/shepherd.service")
    dest = tmp_path / "etc" / "shepherd.service"
    out = install_unit(
        "system", tmp_path / "root", exe=_exe(), user="svc", env={"PATH": "/usr/bin"}, dest=dest
    )
    assert "User=svc" in dest.read_text()
    assert "systemctl daemon-reload && systemctl enable --now shepherd" in out
    assert "linger" not in out


def test_install_refuses_a_missing_executable(tmp_path: Path) -> None:
    with pytest.raises(InstallError):
        install_unit("user", tmp_path, exe=tmp_path / "nope", env={"HOME": str(tmp_path)})
