"""Notes of the compatibility table (docs/differences.md) for rows that are not plain
"supported"; read by ``test_flax_compat_table.py`` when it regenerates the table."""

from __future__ import annotations

NNX = 'an NNX or checkpointing switch; linen has no NNX and no Orbax integration'

NOTES: dict[str, dict[str, tuple[str, str]]] = {
    'flax.linen': {
        'fp8_ops': (
            'differs',
            'every public function except `fp32_max_grad` and the `fm32` dtype (a dtype whose '
            'gradients combine by max needs JAX internals; no public API defines one).',
        ),
        'kw_only_dataclasses': (
            'differs',
            "`field`, `KW_ONLY` and `dataclass` of Flax's backport of `kw_only` (for "
            'Python < 3.10), as `dataclasses` gives them natively: a `kw_only` field is '
            "keyword-only in Python's sense, where Flax moves it to the end of the "
            'positional arguments (see "Smaller differences").',
        ),
        'jit': (
            'differs',
            'the parameters a key gives do not change under `nn.jit` (Flax documents that they '
            'do); retraces when fields, static args, scope structure or the profiling-label '
            'state change (not per instance: N instances of a class compile once, each keeping '
            'its own label). Modules and Variables as arguments are lifted, as in Flax. `setup`'
            ' runs as in Flax on apply (twice per call outside the compiled function, once per '
            'trace); on init one abstract trace per call first learns which rng path hashes the'
            ' compiled function takes as inputs (what lets N instances compile once and keeps '
            'the parameters), so a trace counter inside the body reads one more on init than in'
            ' Flax (2 for N equal instances, where Flax counts 1); a module whose rng use '
            'depends on its input shapes (dropout per row in a loop over rows) learns each new '
            "shape's paths the same way, with one more abstract trace. Other Python side "
            'effects of tracing follow the same rule (an `nn.intercept_methods` interceptor '
            'sees the calls inside where linen traces; fuzz D6): a warning a traced layer '
            "raises (`SelfAttention`'s `DeprecationWarning`) comes in the stages where linen "
            "traces, which need not be Flax's (fuzz finding F19). "
            "`static_argnums`/`donate_argnums` count the module as 0, as Flax's; only the "
            "donated arguments are donated. Flax's refusal of a function target's last two "
            'arguments as static is not reproduced. As in Flax, the method sees (and may '
            'change) only the collections `variables=` admits and only the rng streams `rngs=` '
            'admits.',
        ),
        'remat': (
            'differs',
            '`static_argnums` are placed as Flax places them (`self` is 0; 0 and -1 mark '
            'nothing, -2 is the last argument); one past the positional arguments (an argument '
            "passed by keyword) raises `RematStaticArgnumsError`, JAX's `ValueError` text, at "
            'the call. `static_call_argnums` (new) count the call. `concrete=True` raises when '
            'the transform is made (Flax: at the call; both a `NotImplementedError`). Keyword '
            'arguments are passed through untraced (Flax traces them). As in Flax, the method '
            'sees (and may change) only the collections `variables=` admits and only the rng '
            'streams `rngs=` admits.',
        ),
        'checkpoint': ('differs', 'same as `remat`.'),
        'vmap': (
            'supported',
            'Modules and Variables passed as arguments are lifted, and keyword arguments are '
            "dropped with Flax's `RuntimeWarning`, as in Flax. The body sees only the rng "
            'streams `split_rngs` names (`has_rng` says False for the others, drawing from one '
            "is Flax's `InvalidRngError` or its fallback to `params`), as Flax's. A mapped "
            'variable without the mapped axis (made in `setup` under `nn.jit`, outside the '
            "vmapped call) raises `VmapVariableAxisError` naming it, an `IndexError` as Flax's.",
        ),
        'scan': (
            'supported',
            'As in Flax: the body sees only the rng streams `split_rngs` names; a collection no'
            ' scan rule names is read-only in the body (`sow` returns False; '
            '`linen_strict_scan_collections` makes a write to one raise `ScanCollectionError` '
            'instead), and Modules passed as arguments or fields are lifted; keyword arguments '
            "are dropped with Flax's `RuntimeWarning`. Where Flax asserts, linen's error is an "
            '`AssertionError` too and names the fix: `ScanCarryCreationError` (also a '
            '`TypeError`) for a body creating a `variable_carry` collection, '
            '`ScanBroadcastAxisError` for `variable_axes={...: nn.broadcast}` (use '
            '`variable_broadcast`).',
        ),
        **{
            n: (
                'supported',
                "Modules and Variables among the operands and in `mdl`'s fields are lifted, "
                'and a branch sees only the collections `variables=` and the rng streams '
                '`rngs=` admit, as in Flax.',
            )
            for n in ('cond', 'switch')
        },
        'while_loop': (
            'supported',
            "Modules and Variables in the carry and in `mdl`'s fields are lifted, and the "
            'body sees only the `carry_variables` and `broadcast_variables` collections and '
            'the rng streams `split_rngs` names, as in Flax.',
        ),
        'add_metadata_axis': (
            'supported',
            'one `map_variables` per collection, as in Flax (class `Map_variables<Target>`).',
        ),
        'compact': (
            'supported',
            'several `@compact` methods per class are allowed, as in current Flax (which no '
            'longer raises `MultipleMethodsCompactError`).',
        ),
        'Module': (
            'supported',
            '`parent`/`name` are keyword-only, as in Flax (a positional one is a TypeError).',
        ),
        'enable_named_call': (
            'differs',
            'context-local (per thread/asyncio task) and takes effect at once.',
        ),
        'disable_named_call': ('differs', 'same as `enable_named_call`.'),
        'override_named_call': ('differs', 'same as `enable_named_call`.'),
        'intercept_methods': (
            'supported',
            "fires on unbound modules and on a module's lazy `setup` "
            "(`method_name == 'setup'`), as in Flax; context is Flax's `InterceptorContext`.",
        ),
        'tabulate': ('supported', 'provided by linen-profiling.'),
        'WeightNorm': (
            'supported',
            "as Flax's, the wrapped layer changes no variables in `apply` (its sows and "
            'captured intermediates are dropped, a state update raises '
            '`ModifyScopeVariableError`), whatever `mutable=` says.',
        ),
        'fold_rngs': (
            'supported',
            'as in Flax, the target sees (and may change) only the collections `variables=` '
            'admits and only the rng streams `rngs=` admits.',
        ),
        'map_variables': (
            'supported',
            'as in Flax, the target sees (and may change) only the mapped collections and the '
            'others `variables=` admits, and only the rng streams `rngs=` admits.',
        ),
        'vjp': (
            'supported',
            '`multi_scope=True` lifts the Modules held in fields too and gives one '
            "variable-cotangent dict per scope in a list, the module's own last, as Flax.",
        ),
    },
    'flax.core': {
        **{
            n: ('differs', 'in `linen.transforms.lift` (linen-core imports no other distribution).')
            for n in (
                'broadcast',
                'custom_vjp',
                'jit',
                'jvp',
                'remat',
                'scan',
                'vjp',
                'vmap',
                'while_loop',
            )
        },
        'lift': (
            'differs',
            '`linen.transforms.lift` (linen-core imports no other distribution).',
        ),
        'remat_scan': (
            'differs',
            'in `linen.transforms.lift` (linen-core imports no other distribution).',
        ),
        'axes_scan': (
            'not supported',
            "Flax's internal scan over axes; `lift.scan` covers the user-facing need.",
        ),
        'partial_eval': ('not supported', "a re-export of JAX's internal partial evaluation."),
        'tracers': ('not supported', "Flax's internal trace-level helpers."),
        'check_trace_level': ('not supported', "Flax's internal trace-level check."),
        'current_trace': ('not supported', "Flax's internal trace-level helper."),
        'map_axis_meta': (
            'not supported',
            'use `linen.core.meta.add_axis`/`remove_axis` (a tree map over boxed leaves).',
        ),
        'Scope': (
            'differs',
            "Flax's constructor arguments; `path` only names the scope (variables are the "
            "scope's own, as in Flax); `push(fn, ...)` is also `child(fn, ...)`. A name "
            "claimed twice raises Flax's `ValueError` text (class `DuplicateScopeNameError`, "
            'a `ValueError`).',
        ),
    },
    'flax.core.lift': {
        'CountsHolder': ('not supported', "internal to Flax's lifting."),
        'TransformContext': ('not supported', "internal to Flax's lifting."),
        'id_fn': ('not supported', 'an internal identity helper.'),
        'pack': (
            'not supported',
            "Flax's generic lifting primitive; linen lifts each transform directly. Every "
            'public `lift.*` transform is provided.',
        ),
        'remat_scan': ('supported', 'functional `lift.remat_scan` over a scope.'),
        'set_from_dict': ('not supported', "internal to Flax's lifting."),
        'swap_collection': ('not supported', "internal to Flax's lifting."),
        'tree_map_rngs': ('not supported', "internal to Flax's lifting."),
        'vmap': (
            'supported',
            "over a scope or any pytree of scopes; keyword arguments dropped with Flax's "
            '`RuntimeWarning`, as Flax.',
        ),
        **{
            n: ('supported', 'over a scope or any pytree of scopes, as Flax.')
            for n in (
                'cond',
                'switch',
                'while_loop',
                'vjp',
                'jvp',
                'custom_vjp',
                'map_variables',
                'value_and_grad',
            )
        },
        'jit': (
            'differs',
            "Flax's convention: `jit(fn)(scope, hash_key, *args)` calls `fn(scope, hash_key, "
            '*args)`; `static_argnums` count the scope as 0 and skip the key; rng paths are '
            'cleared inside (as Flax). Differs: rng counters are part of the compile key, so a '
            'second call with advanced counters draws new keys (Flax reuses the first). The '
            '`variables=` and `rngs=` filters apply as in Flax.',
        ),
        'fold_rngs': (
            'supported',
            "Flax's convention: `fold_rngs(fn)(scope, hash_key, *args)`; rng paths cleared; the"
            ' `variables=` and `rngs=` filters apply as in Flax.',
        ),
        **{
            n: (
                'supported',
                "Flax's positional order; any pytree of scopes; `static_argnums` count the "
                'arguments after the scope.',
            )
            for n in ('checkpoint', 'remat')
        },
        'scan': (
            'supported',
            'any pytree of scopes (a tuple, list or dict), as Flax; keyword arguments dropped '
            "with Flax's `RuntimeWarning`, as Flax.",
        ),
        'checkpoint': (
            'supported',
            "Flax's positional order; any pytree of scopes; `static_argnums` count the "
            'arguments after the scope. The `variables=` and `rngs=` filters apply as in Flax.',
        ),
        'remat': (
            'supported',
            "Flax's positional order; any pytree of scopes; `static_argnums` count the "
            'arguments after the scope. The `variables=` and `rngs=` filters apply as in Flax.',
        ),
    },
    'flax.core.scope': {
        'child_rng_token': ('not supported', "internal to Flax's rng bookkeeping."),
        'no_flag': ('not supported', "internal sentinel of Flax's scope flags."),
        'LazyRng': ('supported', "the same object as linen's rng stream (`RngStream`)."),
    },
    'flax.traverse_util': {
        **{
            n: (
                'not supported',
                "Flax's deprecated Traversal API (Flax warns on use); use `path_aware_map` "
                'or `flatten_dict`/`unflatten_dict`, or `ModelParamTraversal`.',
            )
            for n in (
                'Traversal',
                'TraverseAttr',
                'TraverseCompose',
                'TraverseEach',
                'TraverseFilter',
                'TraverseId',
                'TraverseItem',
                'TraverseMerge',
                'TraverseTree',
                't_identity',
            )
        },
    },
    'flax.configurations': {
        'Config': (
            'differs',
            '`update` takes effect at once and tells listeners; flags read `LINEN_*` or '
            '`FLAX_*` environment variables; each flag also has a `linen_` name.',
        ),
        'config.flax_filter_frames': (
            'differs',
            "hides linen's frames from the traceback of an error leaving `init`, "
            "`init_with_output`, `lazy_init` or `apply` (Flax hides its own and JAX's at its "
            'API boundaries); `integration_tests/test_flax_tracebacks.py` compares the frames.',
        ),
        'config.flax_max_repr_depth': (
            'differs',
            'limits the nesting of Module reprs (in Flax it affects NNX reprs only).',
        ),
        'config.flax_profile': (
            'differs',
            'takes effect at once (Flax reads it at import).',
        ),
        **{
            n: ('not supported', NNX)
            for n in (
                'config.flax_always_shard_variable',
                'config.flax_array_ref',
                'config.flax_hijax_variable',
                'config.flax_pytree_module',
                'config.nnx_graph_mode',
                'config.nnx_graph_updates',
                'config.nnx_sow_capture_noop',
                'config.flax_use_orbax_checkpointing',
            )
        },
        'config.flax_use_flaxlib': ('not supported', "switches Flax's C++ helpers (flaxlib)."),
    },
}
