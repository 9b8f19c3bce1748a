"""An unknown spec key is reported with the known key it is closest to, so a typo is fixed at once."""

from pathlib import Path

import pytest

from supervisor.domain.spec import load_spec
from supervisor.domain.yamlpos import YamlDocumentError

GOOD = "name: r\ncommand: [python, train.py]\n"


def errors_of(text: str) -> list[str]:
    with pytest.raises(YamlDocumentError) as exc:
        load_spec(Path("spec.yaml"), GOOD + text)
    return [str(e) for e in exc.value.errors]


def test_a_misspelt_nested_key_names_the_field_it_is_close_to() -> None:
    assert errors_of("resume:\n  max_attemps: 3\n") == [
        "spec.yaml:4: resume.max_attemps: unknown key (not allowed here); did you mean `max_attempts`?"
    ]


def test_a_misspelt_top_level_key_names_the_field_it_is_close_to() -> None:
    assert errors_of("chekpoint: {dir: /ck}\n") == [
        "spec.yaml:3: chekpoint: unknown key (not allowed here); did you mean `checkpoint`?"
    ]


def test_a_key_like_no_field_gets_no_guess() -> None:
    assert errors_of("slurm: {zzzzzz: 1}\n") == ["spec.yaml:3: slurm.zzzzzz: unknown key (not allowed here)"]


def test_a_key_inside_an_optional_section_is_matched_against_that_section() -> None:
    assert errors_of("container: {image: x, mount: [/a]}\n") == [
        "spec.yaml:3: container.mount: unknown key (not allowed here); did you mean `mounts`?"
    ]
