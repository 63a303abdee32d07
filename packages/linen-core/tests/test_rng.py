"""The PRNG rule of docs/design.md, checked against vectors computed here with hashlib."""

from __future__ import annotations

import hashlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linen.core import apply, bind, errors, init
from linen.core._rng import check_rngs, fold_in_path, is_valid_rng, path_hash


def expected_int(raw: bytes) -> int:
    """First four SHA-1 digest bytes, big-endian: the rule spelled out by hand."""
    digest = hashlib.sha1(raw).digest()
    return (digest[0] << 24) | (digest[1] << 16) | (digest[2] << 8) | digest[3]


@pytest.mark.parametrize(
    ('items', 'raw'),
    [
        (('Dense_0', 1), b'Dense_0\x01'),
        (('a', 'b', 2), b'ab\x02'),
        ((300,), b'\x01\x2c'),
        (('params',), b'params'),
        ((255,), b'\xff'),
        ((256,), b'\x01\x00'),
        (('ü', 1), 'ü'.encode() + b'\x01'),
        ((), b''),
    ],
)
def test_path_hash_matches_hand_built_sha1(items, raw):
    assert path_hash(items) == expected_int(raw)
    assert 0 <= path_hash(items) < 2**32


def test_path_hash_of_zero_is_empty_bytes():
    # 0 has bit_length 0: minimal big-endian encoding is no bytes at all.
    assert path_hash(('a', 0)) == expected_int(b'a')


def test_path_hash_rejects_other_items():
    with pytest.raises(TypeError, match='str or int'):
        path_hash(('a', 1.5))


def test_fold_in_path_empty_tuple_is_identity():
    key = jax.random.key(3)
    assert jnp.array_equal(jax.random.key_data(fold_in_path(key, ())), jax.random.key_data(key))


@pytest.mark.parametrize('make_key', [jax.random.key, jax.random.PRNGKey])
def test_make_rng_folds_path_and_counter_into_root(make_key):
    root = make_key(42)
    got = {}

    def fn(scope):
        got['root1'] = scope.make_rng('params')
        got['root2'] = scope.make_rng('params')
        child = scope.push('Dense_0')
        got['child1'] = child.make_rng('params')
        grandchild = child.push('inner')
        got['grand1'] = grandchild.make_rng('params')

    init(fn)(root)

    def want(raw):
        return jax.random.fold_in(root, np.uint32(expected_int(raw)))

    def data(k):
        return np.asarray(
            jax.random.key_data(k) if jax.dtypes.issubdtype(k.dtype, jax.dtypes.prng_key) else k
        )

    assert np.array_equal(data(got['root1']), data(want(b'\x01')))
    assert np.array_equal(data(got['root2']), data(want(b'\x02')))
    assert np.array_equal(data(got['child1']), data(want(b'Dense_0\x01')))
    assert np.array_equal(data(got['grand1']), data(want(b'Dense_0inner\x01')))


def test_counters_are_per_scope_and_per_stream():
    root = jax.random.key(0)
    keys = {}

    def fn(scope):
        keys['p1'] = scope.make_rng('params')
        keys['d1'] = scope.make_rng('dropout')
        keys['d2'] = scope.make_rng('dropout')
        keys['p2'] = scope.make_rng('params')
        keys['c1'] = scope.push('c').make_rng('dropout')

    dkey = jax.random.key(7)
    apply(fn, mutable=True)({}, rngs={'params': root, 'dropout': dkey})

    def same(a, b):
        return np.array_equal(jax.random.key_data(a), jax.random.key_data(b))

    fold = lambda k, raw: jax.random.fold_in(k, np.uint32(expected_int(raw)))
    assert same(keys['p1'], fold(root, b'\x01'))
    assert same(keys['p2'], fold(root, b'\x02'))  # dropout calls did not advance params
    assert same(keys['d1'], fold(dkey, b'\x01'))
    assert same(keys['d2'], fold(dkey, b'\x02'))
    assert same(keys['c1'], fold(dkey, b'c\x01'))  # a child counts from 1 again


def test_missing_stream_falls_back_to_params_and_shares_its_counter():
    root = jax.random.key(5)
    keys = {}

    def fn(scope):
        keys['a'] = scope.make_rng('dropout')
        keys['b'] = scope.make_rng('params')
        keys['has'] = (scope.has_rng('dropout'), scope.has_rng('params'))

    init(fn)(root)
    fold = lambda raw: jax.random.fold_in(root, np.uint32(expected_int(raw)))
    assert np.array_equal(jax.random.key_data(keys['a']), jax.random.key_data(fold(b'\x01')))
    assert np.array_equal(jax.random.key_data(keys['b']), jax.random.key_data(fold(b'\x02')))
    assert keys['has'] == (False, True)


def test_missing_stream_without_params_raises():
    def fn(scope):
        return scope.push('child').make_rng('dropout')

    with pytest.raises(errors.InvalidRngError, match=r'child.*"dropout".*rngs=\{"dropout"'):
        apply(fn)({})


@pytest.mark.parametrize(
    'bad',
    [0, 'key', np.zeros((2,), np.float32), np.zeros((3,), np.uint32), {'params': 1}],
)
def test_invalid_rng_values_raise(bad):
    with pytest.raises(errors.InvalidRngError, match='jax.random.key'):
        check_rngs(bad)
    with pytest.raises(errors.InvalidRngError):
        init(lambda scope: None)(bad)


def test_valid_rng_kinds():
    assert is_valid_rng(jax.random.key(0))
    assert is_valid_rng(jax.random.PRNGKey(0))
    assert not is_valid_rng(jnp.zeros((2,), jnp.int32))
    assert check_rngs(None) == {}
    k = jax.random.key(1)
    assert check_rngs(k)['params'] is k
    assert set(check_rngs({'a': k, 'b': k})) == {'a', 'b'}


def test_typed_and_raw_keys_give_the_same_params():
    def fn(scope):
        return scope.param('w', jax.random.normal, (3,))

    _, v_typed = init(fn)(jax.random.key(9))
    _, v_raw = init(fn)(jax.random.PRNGKey(9))
    assert np.array_equal(v_typed['params']['w'], v_raw['params']['w'])
    want = jax.random.normal(jax.random.fold_in(jax.random.key(9), expected_int(b'\x01')), (3,))
    assert np.array_equal(v_typed['params']['w'], want)


def test_bind_keeps_rng_streams():
    scope = bind({}, rngs={'noise': jax.random.key(2)})
    k = scope.make_rng('noise')
    want = jax.random.fold_in(jax.random.key(2), expected_int(b'\x01'))
    assert np.array_equal(jax.random.key_data(k), jax.random.key_data(want))


def test_fix_rng_separator_hashes_a_nul_before_each_item():
    import hashlib

    from linen.core import config
    from linen.core._rng import path_hash

    def expected(data: bytes) -> int:
        return int.from_bytes(hashlib.sha1(data).digest()[:4], 'big')

    assert path_hash(('ab', 'c')) == path_hash(('a', 'bc')) == expected(b'abc')
    with config.temp_flip_flag('fix_rng_separator', True):
        assert path_hash(('ab', 'c')) == expected(b'\x00ab\x00c')
        assert path_hash(('a', 1)) == expected(b'\x00a\x00\x01')
        assert path_hash(('ab', 'c')) != path_hash(('a', 'bc'))
    assert path_hash(('ab', 'c')) == expected(b'abc')


def test_lazy_rng_create_and_as_jax_rng():
    import jax

    from linen.core import LazyRng
    from linen.core._rng import fold_in_path

    key = jax.random.key(0)
    rng = LazyRng.create(LazyRng.create(key, 'a'), 2)
    assert rng.rng is key and rng.suffix == ('a', 2)
    want = jax.random.key_data(fold_in_path(key, ('a', 2)))
    assert (jax.random.key_data(rng.as_jax_rng()) == want).all()
    assert rng.clear_suffix().suffix == () and rng.clear_suffix().rng is key


def test_constant_initializer_counts_its_draw_but_derives_no_key():
    # zeros/ones ignore their key, so no fold-in is computed for them (Flax folds one
    # in and throws it away); the draw still counts, so the next key is the second.
    root = jax.random.key(11)

    def fn(scope):
        scope.param('bias', jax.nn.initializers.zeros, (3,), jnp.float32)
        scope.param('scale', jax.nn.initializers.ones, (3,), jnp.float32)
        return scope.param('kernel', jax.nn.initializers.normal(1.0), (3,), jnp.float32)

    kernel, variables = init(fn)(root)
    key3 = jax.random.fold_in(root, np.uint32(expected_int(b'\x03')))
    np.testing.assert_array_equal(kernel, jax.random.normal(key3, (3,), jnp.float32))
    np.testing.assert_array_equal(variables['params']['bias'], np.zeros(3, np.float32))
    np.testing.assert_array_equal(variables['params']['scale'], np.ones(3, np.float32))
    jaxpr = jax.make_jaxpr(lambda k: init(fn)(k)[1])(root)
    folds = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == 'random_fold_in']
    assert len(folds) == 1  # the kernel's only


def test_constant_initializer_without_rngs_still_raises():
    def fn(scope):
        return scope.param('bias', jax.nn.initializers.zeros, (3,), jnp.float32)

    with pytest.raises(errors.InvalidRngError):
        init(fn)({})


_KEYS = {'typed': lambda: jax.random.key(5), 'raw': lambda: jax.random.PRNGKey(5)}


@pytest.mark.parametrize('kind', sorted(_KEYS))
def test_traced_fold_in_emits_the_plain_calls_equations(kind):
    # Under a staging trace the fold-in is a cached, inlined jit: the program must hold
    # exactly what `jax.random.fold_in` itself emits (wrap/unwrap for a raw key).
    key = _KEYS[kind]()
    paths = [('Dense_0', 1), ('Dense_1', 2), ('a', 'b', 3)]

    def ours(k):
        return [fold_in_path(k, p) for p in paths]

    def plain(k):
        return [jax.random.fold_in(k, np.uint32(path_hash(p))) for p in paths]

    assert str(jax.make_jaxpr(ours)(key)) == str(jax.make_jaxpr(plain)(key))
    data = jax.random.key_data if kind == 'typed' else (lambda k: k)
    for got, want in zip(jax.jit(ours)(key), plain(key)):
        np.testing.assert_array_equal(data(got), data(want))


@pytest.mark.parametrize('kind', sorted(_KEYS))
def test_fold_in_under_vmap_and_nested_traces_keeps_the_numbers(kind):
    keys = jax.vmap(lambda i: jax.random.fold_in(_KEYS[kind](), i))(jnp.arange(3))
    data = jax.random.key_data if kind == 'typed' else (lambda k: k)
    want = jax.vmap(lambda k: jax.random.fold_in(k, np.uint32(path_hash(('x', 1)))))(keys)
    got = jax.vmap(lambda k: fold_in_path(k, ('x', 1)))(keys)
    np.testing.assert_array_equal(data(got), data(want))
    # A staged key read inside a vmap of something else: the closed-over key is the
    # outer jit's tracer while the vmap's trace is current.
    root = _KEYS[kind]()

    def inner(k):
        return jax.vmap(lambda _: data(fold_in_path(k, ('x', 1))))(jnp.arange(2))

    got2 = jax.jit(inner)(root)
    np.testing.assert_array_equal(
        got2[0], data(jax.random.fold_in(root, np.uint32(path_hash(('x', 1)))))
    )
    np.testing.assert_array_equal(got2[1], got2[0])
