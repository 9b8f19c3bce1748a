"""Settings are checked like specs: an unknown key is an error, and every problem names its line in
shepherd.toml or the SHEPHERD_* variable that set it; the environment beats the file; a reload with a bad file
keeps the settings in force and says where the file is wrong."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from supervisor.daemon.compose import build
from supervisor.domain.notices import Notice
from supervisor.domain.tomlpos import key_lines
from supervisor.settings import Settings, SettingsError, load_settings


@pytest.fixture(autouse=True)
def no_shepherd_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sets the variables it means; none leak in from the suite or the shell."""
    for name in list(os.environ):
        if name.upper().startswith("SHEPHERD_"):
            monkeypatch.delenv(name)


def problems(root: Path, toml: str | bytes | None = None) -> list[str]:
    if toml is not None:
        (root / "shepherd.toml").write_bytes(toml.encode() if isinstance(toml, str) else toml)
    with pytest.raises(SettingsError) as caught:
        load_settings(root)
    return caught.value.problems


def test_a_wrong_type_is_located_at_its_line(tmp_path: Path) -> None:
    toml = "# cadences\n[slurm]\ncommand_timeout_s = 20\npoll_interval_s = 'soon'\n"
    assert problems(tmp_path, toml) == [
        f"{tmp_path}/shepherd.toml:4: slurm.poll_interval_s: should be a valid number, "
        "unable to parse string as a number"
    ]


def test_an_unknown_key_is_an_error_with_the_key_it_was_meant_to_be(tmp_path: Path) -> None:
    toml = '[preflight]\ntest_only = false\nshared_path = ["/"]\n\n[slurm]\npoll_intervall_s = 5\n'
    assert problems(tmp_path, toml) == [
        f"{tmp_path}/shepherd.toml:6: slurm.poll_intervall_s: unknown key (not allowed here); "
        "did you mean `poll_interval_s`?",
        f"{tmp_path}/shepherd.toml:3: preflight.shared_path: unknown key (not allowed here); "
        "did you mean `shared_paths`?",
    ]


def test_an_unknown_section_and_top_level_key_are_errors_too(tmp_path: Path) -> None:
    found = problems(tmp_path, "spec_settle = 1\n\n[slak]\nmode = 'socket'\n")
    assert (
        f"{tmp_path}/shepherd.toml:1: spec_settle: unknown key (not allowed here); did you mean " in found[0]
    )
    assert (
        found[1] == f"{tmp_path}/shepherd.toml:3: slak: unknown key (not allowed here); did you mean `slack`?"
    )


def test_a_rule_across_keys_is_located_at_its_section(tmp_path: Path) -> None:
    toml = "[watch]\npoll_interval_s = 5\npoll_max_interval_s = 2\n"
    [problem] = problems(tmp_path, toml)
    assert problem.startswith(f"{tmp_path}/shepherd.toml:1: watch: watch.poll_max_interval_s (2.0) is below")


def test_a_rule_of_the_whole_settings_names_the_file_and_the_keys(tmp_path: Path) -> None:
    [problem] = problems(tmp_path, "[slurm]\ncommand_timeout_s = 100\n")
    assert problem.startswith(f"{tmp_path}/shepherd.toml: lease.ttl_s - lease.margin_s (55 s) must exceed")


def test_a_toml_syntax_error_is_located(tmp_path: Path) -> None:
    assert problems(tmp_path, "[slurm]\npoll_interval_s = \n") == [
        f"{tmp_path}/shepherd.toml:2: invalid TOML: Invalid value (column 19)"
    ]


def test_a_file_that_is_not_text_is_refused_with_its_byte(tmp_path: Path) -> None:
    assert problems(tmp_path, b"[slurm]\npoll_interval_s = 1 # \xff\n") == [
        f"{tmp_path}/shepherd.toml:2: not UTF-8 text (byte 30)"
    ]


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "shepherd.toml").mkdir()
    [problem] = problems(tmp_path)
    assert problem.startswith(f"{tmp_path}/shepherd.toml: cannot read: ")


def test_the_root_cannot_be_moved_from_inside_it(tmp_path: Path) -> None:
    assert problems(tmp_path, "spec_settle_s = 1\nroot = '/elsewhere'\n") == [
        f"{tmp_path}/shepherd.toml:2: root: not allowed in the settings file (use --root or SHEPHERD_ROOT)"
    ]


def test_a_config_file_that_was_named_must_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHEPHERD_CONFIG_FILE", str(tmp_path / "elsewhere.toml"))
    assert problems(tmp_path) == [f"{tmp_path}/elsewhere.toml: no such file (named by $SHEPHERD_CONFIG_FILE)"]


def test_a_config_file_that_was_named_is_read_instead_of_the_roots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "shepherd.toml").write_text("[slurm]\npoll_interval_s = 1\n")
    (tmp_path / "mine.toml").write_text("[slurm]\npoll_interval_s = 7\n")
    monkeypatch.setenv("SHEPHERD_CONFIG_FILE", str(tmp_path / "mine.toml"))
    assert load_settings(tmp_path).slurm.poll_interval_s == 7


def test_a_bad_variable_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHEPHERD_SLURM__POLL_INTERVAL_S", "abc")
    monkeypatch.setenv("SHEPHERD_LEASE__TTL_S", "0")
    assert problems(tmp_path, "[slurm]\npoll_interval_s = 3\n") == [
        "$SHEPHERD_SLURM__POLL_INTERVAL_S: slurm.poll_interval_s: should be a valid number, "
        "unable to parse string as a number",
        "$SHEPHERD_LEASE__TTL_S: lease.ttl_s: should be greater than 0",
    ]


def test_a_misspelt_variable_is_an_unknown_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHEPHERD_PREFLIGHT__SHARED_PATH", '["/"]')
    assert problems(tmp_path) == [
        "$SHEPHERD_PREFLIGHT__SHARED_PATH: preflight.shared_path: unknown key (not allowed here); "
        "did you mean `shared_paths`?"
    ]


def test_a_list_variable_that_is_not_json_is_named_with_an_example(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHEPHERD_PREFLIGHT__SHARED_PATHS", "/shared")
    assert problems(tmp_path) == [
        "$SHEPHERD_PREFLIGHT__SHARED_PATHS: preflight.shared_paths: not valid JSON (a list or table is given "
        """as JSON here, e.g. SHEPHERD_PREFLIGHT__SHARED_PATHS='["/shared"]')"""
    ]


def test_the_environment_beats_the_file_and_the_file_beats_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "shepherd.toml").write_text("[slurm]\npoll_interval_s = 3\nidle_poll_interval_s = 30\n")
    monkeypatch.setenv("SHEPHERD_SLURM__POLL_INTERVAL_S", "5")
    settings = load_settings(tmp_path)
    assert settings.slurm.poll_interval_s == 5  # the variable
    assert settings.slurm.idle_poll_interval_s == 30  # the file
    assert settings.slurm.steady_poll_interval_s == 60  # the default


def test_the_root_given_is_where_the_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "shepherd.toml").write_text("[slurm]\npoll_interval_s = 9\n")
    monkeypatch.setenv("SHEPHERD_ROOT", str(tmp_path / "other"))
    assert load_settings(tmp_path).slurm.poll_interval_s == 10  # --root's file (none), not $SHEPHERD_ROOT's
    assert Settings(root=tmp_path / "other").slurm.poll_interval_s == 9


def test_no_secret_value_is_repeated_in_a_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHEPHERD_SLACK__MODE", "xoxb-secret-token")
    [problem] = problems(tmp_path, "[slack]\nbot_token = ['xoxb-other-secret']\n")[:1]
    assert "secret" not in problem and problem.startswith("$SHEPHERD_SLACK__MODE: slack.mode: should be")


def test_every_key_line_is_found_past_strings_comments_and_multi_line_values() -> None:
    text = """\
top = "a = [b" # c = 1
[slack]
authorised_users = [
  "U1",  # not = a key
  "U2",
]
base_url = \"\"\"
x = 1
\"\"\"
team_channels = { ml = "C1" }
"quoted.key" = 1
a.b = 2

[[arrays]]
x = 1
"""
    assert key_lines(text) == {
        ("top",): 1,
        ("slack",): 2,
        ("slack", "authorised_users"): 3,
        ("slack", "base_url"): 7,
        ("slack", "team_channels"): 10,
        ("slack", "quoted.key"): 11,
        ("slack", "a"): 12,
        ("slack", "a", "b"): 12,
        ("arrays",): 14,
        ("arrays", "x"): 15,
    }


class Recorder:
    def __init__(self) -> None:
        self.notices: list[Notice] = []

    def publish(self, notice: Notice) -> None:
        self.notices.append(notice)

    def publish_plot(self, run_id: str, png: str, title: str) -> None:
        pass


def test_a_reload_with_a_bad_file_keeps_the_settings_and_says_where_the_file_is_wrong(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    toml = root / "shepherd.toml"
    toml.write_text("[slurm]\npoll_interval_s = 3.0\n")
    rec = Recorder()
    built = build(load_settings(root), sinks=[rec])
    toml.write_text("[slurm]\npoll_interval_s = 7.5\npoll_intervals = 1\n")

    result = anyio.run(built.reloader.reload_now, "test")

    assert not result.all_ok
    assert built.daemon.settings.slurm.poll_interval_s == 3.0  # nothing of the bad file was taken
    [alert] = [n for n in rec.notices if n.kind == "alert"]
    assert "still using the previous settings" in alert.title
    assert f"{toml}:3: slurm.poll_intervals: unknown key" in alert.title
