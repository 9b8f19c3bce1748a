"""`shepherd completion bash|zsh`: the script completes the parser's own verbs, subcommands, options and
choices, run in a real bash."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from supervisor.cli.completion import bash_script, command_tree, zsh_script
from supervisor.cli.main import build_parser, main


def complete(script: Path, *words: str) -> list[str]:
    """What bash offers for the last of `words` (the one being typed) after `shepherd`."""
    line = " ".join(["shepherd", *words])
    quoted = " ".join(f"'{w}'" for w in ["shepherd", *words])
    probe = (
        f"source {script}; COMP_WORDS=({quoted}); COMP_CWORD={len(words)}; COMP_LINE='{line}'; "
        '_shepherd; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True).stdout
    return [w for w in out.splitlines() if w]


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("completion") / "shepherd.bash"
    path.write_text(bash_script(command_tree(build_parser())))
    return path


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_verbs_subcommands_options_and_choices_complete(script: Path) -> None:
    assert sorted(complete(script, "re")) == ["release", "report", "resume"]
    assert complete(script, "rules", "") == ["check", "test", "list", "suggest"]
    assert complete(script, "resume", "myrun", "--s") == ["--set"]
    assert complete(script, "completion", "") == ["bash", "zsh"]
    assert "--dry-run" in complete(script, "submit", "--")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_an_options_value_is_not_taken_for_a_verb(script: Path) -> None:
    assert complete(script, "--root", "rules", "rules", "") == ["check", "test", "list", "suggest"]
    assert complete(script, "resume", "--set", "rules", "--s") == ["--set"]


def test_hidden_options_are_not_offered() -> None:
    tree = command_tree(build_parser())
    assert "--root" in tree[""].options
    assert "--root" not in tree["status"].options  # the per-verb copy is hidden


def test_the_verb_prints_the_script_for_each_shell(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("complete -o default -F _shepherd shepherd")
    assert main(["completion", "zsh"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("#compdef shepherd\n") and "bashcompinit" in out
    assert zsh_script(command_tree(build_parser())) == out
