import pytest

from linen.core import spmd


@pytest.fixture(autouse=True)
def _no_leaked_rules():
    # Rules are context-local; a test that sets them with set_logical_axis_rules
    # must not hand them to the next one.
    yield
    spmd.set_logical_axis_rules(())
