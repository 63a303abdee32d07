"""Labels and tabulate's recording are context-local: threads and asyncio tasks do not mix."""

import asyncio
import re
import threading

import jax
import jax.numpy as jnp
import pytest

lm = pytest.importorskip('linen.module')

from linen.profiling import override_named_call, tabulate  # noqa: E402

X = jnp.ones((2, 3))


class Dense(lm.Module):
    features: int

    @lm.compact
    def __call__(self, x):
        kernel = self.param('kernel', lambda key, s: jnp.ones(s), (x.shape[-1], self.features))
        return x @ kernel


def _labels(model):
    variables = model.init(jax.random.key(0), X)
    # A fresh function each time, so no trace cache carries another context's labels.
    text = jax.jit(lambda v, x: model.apply(v, x)).lower(variables, X).compile().as_text()
    return set(re.findall(r'op_name="[^"]*?/(\w+)/dot_general"', text))


def _run_threads(*targets):
    errors = []

    def guarded(target):
        try:
            target()
        except BaseException as error:  # re-raised in the main thread below
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    if errors:
        raise errors[0]


def test_tabulate_from_two_threads_at_once_keeps_each_tables_rows():
    both_recording = threading.Barrier(2, timeout=30)
    a_finished = threading.Event()

    def model(label):
        class Model(lm.Module):
            @lm.compact
            def __call__(self, x):
                both_recording.wait()  # both threads are inside tabulate's init here
                if label == 'b':
                    # b's submodule call comes after a's tabulate has returned: a's
                    # cleanup must not end b's recording.
                    assert a_finished.wait(timeout=30)
                return Dense(2, name=f'{label}_dense')(x)

        Model.__name__ = f'Model_{label}'
        return Model()

    tables = {}

    def tabulate_in_thread(label):
        tables[label] = tabulate(model(label), jax.random.key(0))(X)
        if label == 'a':
            a_finished.set()

    _run_threads(lambda: tabulate_in_thread('a'), lambda: tabulate_in_thread('b'))
    assert 'a_dense' in tables['a'] and 'b_dense' not in tables['a']
    assert 'b_dense' in tables['b'] and 'a_dense' not in tables['b']
    # Nothing is left recording afterwards, in any thread.
    from linen.profiling._recording import is_recording

    assert not is_recording()


def test_override_named_call_is_per_thread():
    inside = threading.Barrier(2, timeout=30)
    seen = {}

    def without_labels():
        with override_named_call(False):
            inside.wait()  # the other thread lowers while this one has labels off
            seen['off'] = _labels(Dense(2, name='off_thread'))
            inside.wait()

    def with_labels():
        with override_named_call(True):
            inside.wait()
            seen['on'] = _labels(Dense(2, name='on_thread'))
            inside.wait()

    _run_threads(without_labels, with_labels)
    assert seen['off'] == set()
    assert seen['on'] == {'on_thread'}


def test_override_named_call_is_per_asyncio_task():
    async def task(enable, name, switched, other_switched):
        with override_named_call(enable):
            switched.set()
            await other_switched.wait()  # both tasks are inside their override now
            return _labels(Dense(2, name=name))

    async def main():
        a, b = asyncio.Event(), asyncio.Event()
        return await asyncio.gather(task(False, 'off_task', a, b), task(True, 'on_task', b, a))

    off, on = asyncio.run(main())
    assert off == set()
    assert on == {'on_task'}
