import pytest

from linen.core._bus import import_string
from linen.profiling import _plugin, _state
from linen.profiling._labels import label_at_boundary, label_method_call


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setattr(_state, '_invalidate', lambda everywhere=False: None)


def test_exports_resolve_to_the_public_objects():
    import linen.profiling as profiling

    exports = _plugin.linen_exports()
    # What flax.linen has of profiling (the summary module too), and linen's reports.
    assert {'enable_named_call', 'tabulate', 'module_costs', 'summary'} <= set(exports)
    assert set(exports) - {'summary'} <= set(profiling.__all__)
    for public_name, target in exports.items():
        assert import_string(target) is getattr(profiling, public_name)


def test_wrapper_only_while_labels_are_on():
    with _state.override_named_call(True):
        wrapper = _plugin.linen_method_wrapper()
        assert wrapper.wrap is label_method_call
        assert wrapper.at_boundary is label_at_boundary
    with _state.override_named_call(False):
        assert _plugin.linen_method_wrapper() is None


def test_default_name_hook_is_trylast():
    class Dense:
        name = None

        def __call__(self, x): ...

    assert _plugin.linen_profiling_name(Dense(), '__call__', Dense.__call__) == 'Dense'
    assert _plugin.linen_profiling_name.linen_impl['trylast'] is True


def test_public_surface():
    import linen.profiling as profiling

    for name in profiling.__all__:
        assert hasattr(profiling, name)
