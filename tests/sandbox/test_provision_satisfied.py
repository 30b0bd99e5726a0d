"""Local provisioning asks no package index when the run's interpreter already has every requirement
(Binder installs a demo's packages at build time and may have no index at run time): a skill that needs
only what is installed runs with the index unreachable, and one that needs more still asks it and says it
could not be reached."""

from __future__ import annotations

import pytest

from ipyskills.sandbox.provision.satisfied import all_present

PRESENT = {"matplotlib": "3.11.2", "numpy": "2.3.1", "typing-extensions": "4.12.0"}


@pytest.mark.parametrize("specs, expected", [
    (["matplotlib"], True),
    (["matplotlib>=3.6", "numpy<3"], True),
    (["Typing_Extensions>=4"], True),  # names compare normalised
    (["matplotlib>=3.12"], False),  # installed, but too old
    (["pandas"], False),  # not installed
    (["matplotlib[dev]"], False),  # extras: the index decides
    (["pkg @ https://example.invalid/pkg.whl"], False),
    (["pywin32; sys_platform == 'win32'", "numpy"], True),  # a marker false here needs nothing
    (["not a requirement !!"], False),
    ([], True),
])
def test_what_counts_as_already_installed(specs, expected):
    assert all_present(specs, PRESENT) is expected


def test_installed_requirements_are_provisioned_with_the_index_unreachable(monkeypatch):
    from ipyskills.errors import SkillError
    from ipyskills.sandbox.provision import local_site

    monkeypatch.setenv("UV_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens on the discard port
    monkeypatch.setenv("UV_OFFLINE", "1")
    present = local_site.present_distributions()
    name = next(n for n in ("packaging", "pyyaml", "mistune") if n in present)
    done = local_site.ensure_site([name, f"{name}>={present[name]}"], reasons=[f"{name} (test)"])
    assert done.installed == [] and done.site == "" and not done.built
    with pytest.raises(SkillError):  # the control: something not installed still asks the index, and fails
        local_site.ensure_site(["ipyskills-test-not-installed-anywhere"], reasons=["(test)"])
