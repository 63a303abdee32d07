import pytest

from linen.core import spmd


@pytest.fixture(autouse=True)
def _fresh_rule_warnings():
    # Rule problems warn once per process; each test must see its own warnings.
    spmd._WARNED.clear()
    yield
    spmd._WARNED.clear()
