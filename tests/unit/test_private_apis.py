"""The private APIs of other libraries the package still uses (dali_pipes/private_apis.py):
each one's probe passes on the installed versions, so an upgrade that removes or changes
one fails here in one line naming it; the list names where each is used; and the private
APIs that have public replacements stay replaced."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from conftest import REPO

from dali_pipes.private_apis import PRIVATE_APIS, PrivateApi

SRC = REPO / "dali_pipes"


def source_of(module: str) -> str:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    return Path(spec.origin).read_text()


@pytest.mark.parametrize("api", PRIVATE_APIS, ids=lambda api: api.name)
def test_each_private_api_the_package_uses_is_still_there(api: PrivateApi) -> None:
    if not api.available:
        pytest.skip(f"{api.needs} is not installed")
    gone = api.gone()
    assert gone is None, gone


@pytest.mark.parametrize("api", PRIVATE_APIS, ids=lambda api: api.name)
def test_each_private_api_is_used_where_the_list_says(api: PrivateApi) -> None:
    assert api.what and api.why and api.used_in and api.spelled
    for module in api.used_in:
        text = source_of(module)
        missing = [s for s in api.spelled if s not in text]
        assert not missing, f"{module} no longer uses {api.name} ({missing}): update the list"


def test_a_private_api_that_is_gone_is_named_in_one_line() -> None:
    def probe() -> None:
        raise AttributeError("type object 'Thing' has no attribute '_gone'\n(more)")

    api = PrivateApi(
        "lib.Thing._gone", "a thing", ("dali_pipes.x",), ("_gone",), "none", probe, "lib"
    )
    assert api.gone() == (
        "private API lib.Thing._gone is gone or changed (AttributeError: type object 'Thing' "
        "has no attribute '_gone' (more)); used in dali_pipes.x"
    )


REPLACED = {
    "torch.utils.data._utils": "torch.utils.data.default_collate",
    "hydra._internal": "hydra.utils.get_object",
    "._get_node(": "DictConfig.items_ex(resolve=False) / OmegaConf.get_type",
    "._metadata": "OmegaConf.get_type",
    "_NormBase": "torch.nn's public norm layer classes",
}


@pytest.mark.parametrize("private", REPLACED)
def test_a_private_api_with_a_public_replacement_is_not_used(private: str) -> None:
    found = [
        str(path.relative_to(REPO))
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "private_apis.py" and private in path.read_text()
    ]
    assert not found, f"{private} in {found}: use {REPLACED[private]}"
