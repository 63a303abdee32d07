"""Comparing what a stage produced under Flax and under linen.

Each stage's result is first reduced to a *canonical* list of ``(path, fact)`` pairs
that no longer mentions either library's types: mappings (and whether they are a
``FrozenDict``), sequences, metadata boxes (class name, axis names, mesh, rules),
arrays (shape, dtype, and the bytes, so values compare bit for bit; PRNG keys by
their key data). Raised exceptions are reduced to an :class:`ErrorInfo`. Then
:func:`compare_outcomes` lists the :class:`Difference` s of one stage.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import jax
import numpy as np

BOXES = ('Partitioned', 'LogicallyPartitioned')


@dataclass(frozen=True)
class ErrorInfo:
    """An exception, reduced to what users can match on."""

    name: str
    family: tuple[str, ...]  # the builtin classes in its MRO, most specific first
    from_flax_errors: bool  # a class of flax.errors (linen must keep the name)
    message: str

    @staticmethod
    def of(exc: BaseException) -> ErrorInfo:
        mro = type(exc).__mro__
        family = tuple(c.__name__ for c in mro if c.__module__ == 'builtins')
        return ErrorInfo(
            type(exc).__name__,
            family,
            type(exc).__module__ == 'flax.errors',
            str(exc),
        )

    def first_sentence(self) -> str:
        """What users match on: the text up to the first sentence end or colon.

        A colon ends it too: what follows one in Flax's messages is a detail (a
        variable's repr, a path) that differs between the libraries' renderings.
        """
        text = self.message.strip().split('\n', 1)[0]
        text = text.split(' (https://', 1)[0]
        match = re.match(r'(.+?)([.!?]|:)(\s|$)', text)
        return (match.group(1) if match else text).strip()


@dataclass
class Outcome:
    """What one stage gave under one library: a canonical value or an error."""

    value: list | None = None
    error: ErrorInfo | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Difference:
    stage: str
    kind: str
    detail: str = field(compare=False)

    def signature(self) -> tuple[str, str]:
        return (self.stage, self.kind)

    def __str__(self) -> str:
        return f'[{self.stage}] {self.kind}: {self.detail}'


def _is_box(x) -> bool:
    return type(x).__name__ in BOXES and hasattr(x, 'value') and hasattr(x, 'names')


def canonical(tree, values: bool = True) -> list[tuple[str, tuple]]:
    """``(path, fact)`` pairs describing ``tree``, free of library types."""
    out: list[tuple[str, tuple]] = []
    _walk(tree, '', out, values)
    return out


def _walk(x, path: str, out: list, values: bool) -> None:
    kind = type(x).__name__
    if _is_box(x):
        out.append((path, ('box', kind, tuple(x.names), repr(getattr(x, 'mesh', None)),
                           repr(getattr(x, 'rules', None)))))  # fmt: skip
        _walk(x.value, f'{path}.value', out, values)
    elif isinstance(x, Mapping):
        keys = sorted(x.keys(), key=str)
        out.append((path, ('map', 'FrozenDict' if kind == 'FrozenDict' else 'dict',
                           tuple(map(str, keys)))))  # fmt: skip
        for k in keys:
            _walk(x[k], f'{path}/{k}', out, values)
    elif isinstance(x, jax.ShapeDtypeStruct):
        out.append((path, ('array', tuple(x.shape), str(x.dtype), None)))
    elif isinstance(x, (list, tuple)):
        out.append((path, ('seq', kind, len(x))))
        for i, item in enumerate(x):
            _walk(item, f'{path}[{i}]', out, values)
    elif hasattr(x, 'shape') and hasattr(x, 'dtype'):
        dtype = str(x.dtype)
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x = jax.random.key_data(x)
        arr = np.asarray(x)
        out.append((path, ('array', tuple(arr.shape), dtype, arr.copy() if values else None)))
    elif x is None or isinstance(x, (bool, int, float, str)):
        # repr: NaN equals NaN, and -0.0 differs from 0.0, as bit for bit demands
        out.append((path, ('py', kind, repr(x) if isinstance(x, float) else x)))
    else:
        out.append((path, ('object', kind)))


def _describe(fact: tuple) -> str:
    if fact[0] == 'array':
        return f'array{fact[1]} {fact[2]}'
    return repr(fact)


def compare_values(stage: str, a: list, b: list) -> list[Difference]:
    """Differences between two canonical lists (``a`` Flax's, ``b`` linen's)."""
    diffs: list[Difference] = []
    da, db = dict(a), dict(b)
    for path in [p for p, _ in a if p not in db]:
        diffs.append(Difference(stage, 'structure', f'{path or "/"} only under Flax'))
    for path in [p for p, _ in b if p not in da]:
        diffs.append(Difference(stage, 'structure', f'{path or "/"} only under linen'))
    for path, fa in a:
        fb = db.get(path)
        if fb is None:
            continue
        if fa[0] != fb[0] or (fa[0] != 'array' and fa != fb):
            kind = 'box' if 'box' in (fa[0], fb[0]) else 'structure'
            if fa[0] == fb[0] == 'map' and fa[1] != fb[1]:
                kind = 'container-type'
            diffs.append(Difference(stage, kind, f'{path or "/"}: Flax {fa!r}, linen {fb!r}'))
        elif fa[0] == 'array':
            if fa[1:3] != fb[1:3]:
                diffs.append(Difference(stage, 'shape-dtype',
                                        f'{path}: Flax {_describe(fa)}, linen {_describe(fb)}'))  # fmt: skip
            elif fa[3] is not None and fb[3] is not None:
                x, y = fa[3], fb[3]
                if x.tobytes() != y.tobytes():
                    kind = 'values'
                    if x.dtype.kind in 'fc' and np.allclose(x, y, rtol=1e-5, atol=1e-6):
                        kind = 'values-ulp'
                    diffs.append(Difference(
                        stage, kind, f'{path}: max |diff| {_max_diff(x, y)}'))  # fmt: skip
    return diffs


def _max_diff(x: np.ndarray, y: np.ndarray) -> str:
    try:
        return f'{float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))):.3g}'
    except (TypeError, ValueError):
        return 'n/a'


def compare_outcomes(stage: str, flax: Outcome, linen: Outcome) -> list[Difference]:
    """Every difference of one stage: raising, error class and sentence, warnings, values."""
    diffs: list[Difference] = []
    if (flax.error is None) != (linen.error is None):
        which, err = ('linen', linen.error) if flax.error is None else ('Flax', flax.error)
        assert err is not None
        diffs.append(
            Difference(stage, 'raises', f'only {which} raises {err.name}: {err.message[:300]}')
        )
        return diffs
    if flax.error is not None and linen.error is not None:
        f, l = flax.error, linen.error
        if f.from_flax_errors and f.name != l.name:
            diffs.append(
                Difference(stage, 'error-type', f'Flax {f.name}, linen {l.name}: {l.message[:200]}')
            )
        elif not f.from_flax_errors and f.family[0] not in l.family:
            diffs.append(Difference(stage, 'error-type',
                                    f'Flax {f.name} ({f.family[0]}), linen {l.name} {l.family}: '
                                    f'{f.message[:150]} | {l.message[:150]}'))  # fmt: skip
        elif f.from_flax_errors and not l.message.strip().startswith(f.first_sentence()):
            diffs.append(Difference(stage, 'error-message',
                                    f'Flax {f.first_sentence()!r}, linen {l.message[:200]!r}'))  # fmt: skip
    else:
        diffs += compare_values(stage, flax.value or [], linen.value or [])
    if flax.warnings != linen.warnings:
        diffs.append(Difference(stage, 'warnings', f'Flax {flax.warnings}, linen {linen.warnings}'))
    return diffs


__all__ = ['Difference', 'ErrorInfo', 'Outcome', 'canonical', 'compare_outcomes', 'compare_values']
