import asyncio
import threading

import pytest

from linen.core.config import config
from linen.profiling import (
    _state,
    disable_named_call,
    enable_named_call,
    is_named_call_enabled,
    override_named_call,
)


@pytest.fixture(autouse=True)
def invalidations(monkeypatch, restore_profile_flag):
    # These tests check the state alone; the dispatcher's side is tested with Modules.
    calls = []
    monkeypatch.setattr(_state, '_invalidate', lambda everywhere=False: calls.append(everywhere))
    token = _state._switch.set(None)
    yield calls
    _state._switch.reset(token)


def test_default_follows_config_flag():
    config.update('linen_profile', True)
    assert is_named_call_enabled()
    config.update('linen_profile', False)
    assert not is_named_call_enabled()
    config.update('flax_profile', True)  # Flax's name is an alias
    assert is_named_call_enabled()


def test_config_update_invalidates_every_chain(invalidations):
    config.update('linen_profile', False)
    assert invalidations == [True]


def test_enable_and_disable(invalidations):
    config.update('linen_profile', True)
    invalidations.clear()
    disable_named_call()
    assert not is_named_call_enabled()
    disable_named_call()  # no change, no rebuild
    enable_named_call()
    assert is_named_call_enabled()
    assert invalidations == [False, False]


def test_explicit_switch_wins_over_config():
    disable_named_call()
    config.update('linen_profile', True)
    assert not is_named_call_enabled()


def test_override_restores_on_exception_and_nests():
    enable_named_call()
    with pytest.raises(RuntimeError, match='boom'):
        with override_named_call(False):
            assert not is_named_call_enabled()
            with override_named_call(True):
                assert is_named_call_enabled()
            assert not is_named_call_enabled()
            raise RuntimeError('boom')
    assert is_named_call_enabled()


def test_override_tells_the_dispatcher_on_entry_and_exit(invalidations):
    enable_named_call()
    invalidations.clear()
    with override_named_call(False):
        pass
    assert invalidations == [False, False]
    invalidations.clear()
    with override_named_call(True):  # already on: nothing to rebuild
        pass
    assert invalidations == []


def test_threads_see_their_own_state():
    config.update('linen_profile', True)
    inside = threading.Event()
    release = threading.Event()
    seen = {}

    def worker():
        with override_named_call(False):
            seen['worker'] = is_named_call_enabled()
            inside.set()
            release.wait(5)

    thread = threading.Thread(target=worker)
    thread.start()
    inside.wait(5)
    seen['main while worker is off'] = is_named_call_enabled()
    release.set()
    thread.join()
    assert seen == {'worker': False, 'main while worker is off': True}


def test_asyncio_tasks_see_their_own_state():
    config.update('linen_profile', True)

    async def off(started, release):
        with override_named_call(False):
            started.set()
            await release.wait()
            return is_named_call_enabled()

    async def main():
        started, release = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(off(started, release))
        await started.wait()
        during = is_named_call_enabled()
        release.set()
        return during, await task

    assert asyncio.run(main()) == (True, False)
