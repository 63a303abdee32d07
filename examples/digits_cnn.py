"""The demo's model, data, training loop and reports: a small CNN on scikit-learn's digits.

``examples/demo.py`` is the command line (``python examples/demo.py --help``); it
checks that everything in ``examples/requirements.txt`` is installed before it
imports this module, so a missing package is named before any work starts, and
``--help`` answers without importing JAX.

It shows what a Flax user does every day, with ``import linen.nn as nn`` in place
of ``import flax.linen as nn``:

- a convolutional classifier with ``BatchNorm`` (the ``batch_stats`` collection,
  updated with ``mutable=``), ``Dropout`` (the ``dropout`` rng stream) and
  ``nn.remat`` on its convolution blocks, trained with optax through
  ``linen.training.TrainState`` in a ``jax.jit`` train step, a rich progress bar
  per epoch;
- an orbax-checkpoint checkpoint written halfway, read back, compared leaf by leaf
  with the state that was saved, and training resumed from the restored copy;
- at the end: held-out accuracy, the per-module FLOPs/bytes table
  (``linen.profiling.module_costs``), the per-module time table of a real profiler
  trace (``linen.profiling.profile``; the trace folder opens in TensorBoard or
  XProf), the joined report of linen-profiling (FLOPs forward/backward/recompute,
  time, memory and trace time per module), a flame graph of time per module (PNG
  and HTML), a Perfetto trace with one track per module, the ``Module.tabulate``
  summary and a PNG of the training curves, each written under ``--out`` and
  printed with its path.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

# Imported before anything is traced: importing orbax defines JAX config options
# that take part in jit's cache key, and a first import at the checkpoint, between
# two epochs, would make jit compile the train step a second time.
import orbax.checkpoint as ocp

import linen.nn as nn
import linen.profiling as lp
from linen.training import TrainState

NUM_CLASSES = 10


# ----------------------------------------------------------------------------- data


def load_digits(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The 1,797 8x8 digit images that ship with scikit-learn, split 80/20, stratified."""
    from sklearn.datasets import load_digits as sklearn_digits
    from sklearn.model_selection import train_test_split

    digits = sklearn_digits()
    # Pixels are 0..16; NHWC with one channel, as nn.Conv expects.
    images = (digits.images / 16.0).astype(np.float32)[..., None]
    labels = digits.target.astype(np.int32)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=0.2, random_state=seed, stratify=labels
    )
    return x_train, y_train, x_test, y_test


def batches(x: np.ndarray, y: np.ndarray, batch_size: int, rng: np.random.Generator):
    """Shuffled full batches: a partial last batch would be one more shape to compile."""
    order = rng.permutation(len(x))
    for start in range(0, len(x) - batch_size + 1, batch_size):
        index = order[start : start + batch_size]
        yield x[index], y[index]


# ---------------------------------------------------------------------------- model


class ConvBlock(nn.Module):
    """3x3 convolution, batch norm, ReLU."""

    features: int

    @nn.compact
    def __call__(self, x, train: bool):
        x = nn.Conv(self.features, (3, 3), use_bias=False)(x)
        x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
        return nn.relu(x)


# Recompute the blocks' activations in the backward pass instead of keeping them:
# what a real (deeper, wider) CNN does to fit its batch in memory. `train` is static
# (a Python bool); static_argnums count `self` as Flax's do, so `__call__(self, x,
# train)` marks it with 2 (see docs/differences.md).
RematConvBlock = nn.remat(ConvBlock, static_argnums=(2,))


class CNN(nn.Module):
    """Two remat'd conv blocks, a pooling step and a dense head with dropout."""

    widths: tuple[int, ...] = (32, 64)
    hidden: int = 128
    dropout_rate: float = 0.25

    @nn.compact
    def __call__(self, x, train: bool = False):
        for features in self.widths:
            x = RematConvBlock(features)(x, train)
            x = nn.max_pool(x, (2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(self.hidden)(x))
        x = nn.Dropout(self.dropout_rate, deterministic=not train)(x)
        return nn.Dense(NUM_CLASSES, name='head')(x)


class CNNState(TrainState):
    """The train state plus BatchNorm's running statistics."""

    batch_stats: Any = None


def create_state(model: CNN, key: jax.Array, sample: np.ndarray, learning_rate: float) -> CNNState:
    # Under jit, init compiles once instead of dispatching every op on its own.
    variables = jax.jit(model.init, static_argnames='train')(key, jnp.asarray(sample), train=False)
    state = CNNState.create(
        apply_fn=model.apply,
        params=variables['params'],
        batch_stats=variables['batch_stats'],
        tx=optax.adam(learning_rate),
    )
    # A restored checkpoint holds strongly typed arrays committed to a device. The
    # state starts the same way (create() gives the Python int 0, as Flax's does,
    # and fresh arrays are uncommitted): otherwise that difference alone would make
    # jit compile the train step a second time after the restore.
    state = state.replace(step=jnp.zeros((), jnp.int32))
    return jax.device_put(state, jax.devices()[0])


# -------------------------------------------------------------------------- training


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def train_step_fn(state: CNNState, x: jax.Array, y: jax.Array, dropout_key: jax.Array):
    """One Adam step; returns the new state and the batch's loss and accuracy."""
    # A fresh dropout key per step, derived from the step count: resuming from a
    # checkpoint continues the same sequence of masks.
    key = jax.random.fold_in(dropout_key, state.step)

    def loss_fn(params):
        logits, updates = state.apply_fn(
            {'params': params, 'batch_stats': state.batch_stats},
            x,
            train=True,
            rngs={'dropout': key},
            mutable=['batch_stats'],
        )
        return cross_entropy(logits, y), (logits, updates['batch_stats'])

    (loss, (logits, batch_stats)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    state = state.apply_gradients(grads=grads, batch_stats=batch_stats)
    accuracy = jnp.mean(jnp.argmax(logits, -1) == y)
    return state, loss, accuracy


train_step = jax.jit(train_step_fn)


@jax.jit
def evaluate(state: CNNState, x: jax.Array, y: jax.Array):
    logits = state.apply_fn({'params': state.params, 'batch_stats': state.batch_stats}, x)
    return cross_entropy(logits, y), jnp.mean(jnp.argmax(logits, -1) == y)


def train_epochs(state, data, epochs, first_epoch, args, dropout_key, history):
    """Runs epochs ``first_epoch .. first_epoch + epochs - 1`` with a progress bar each."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    x_train, y_train, x_test, y_test = data
    steps = len(x_train) // args.batch_size
    columns = (
        TextColumn('[bold]{task.description}'),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn('loss {task.fields[loss]:.4f}  acc {task.fields[acc]:6.2%}'),
        TimeElapsedColumn(),
    )
    with Progress(*columns) as progress:
        for epoch in range(first_epoch, first_epoch + epochs):
            task = progress.add_task(
                f'epoch {epoch + 1:2d}/{args.epochs}', total=steps, loss=0, acc=0
            )
            rng = np.random.default_rng(args.seed + epoch)
            losses, accuracies = [], []
            for x, y in batches(x_train, y_train, args.batch_size, rng):
                state, loss, accuracy = train_step(state, x, y, dropout_key)
                losses.append(float(loss))
                accuracies.append(float(accuracy))
                progress.update(task, advance=1, loss=np.mean(losses), acc=np.mean(accuracies))
            test_loss, test_accuracy = evaluate(state, x_test, y_test)
            history.append(
                {
                    'epoch': epoch + 1,
                    'train_loss': float(np.mean(losses)),
                    'train_accuracy': float(np.mean(accuracies)),
                    'test_loss': float(test_loss),
                    'test_accuracy': float(test_accuracy),
                }
            )
            progress.update(
                task,
                description=f'epoch {epoch + 1:2d}/{args.epochs} (held-out {float(test_accuracy):.2%})',
            )
    return state


# ------------------------------------------------------------------------ checkpoint


def save_and_restore(state: CNNState, directory: Path) -> CNNState:
    """Writes ``state`` with orbax-checkpoint, reads it back and checks it is exact."""
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(directory, state, force=True)
    checkpointer.wait_until_finished()
    # Restoring into the abstract shape of the state rebuilds a CNNState (apply_fn
    # and tx are static fields: they come from the target, not the files).
    target = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, state)
    restored = checkpointer.restore(directory, target)
    checkpointer.close()
    saved_leaves = jax.tree_util.tree_leaves_with_path(state)
    restored_leaves = jax.tree_util.tree_leaves(restored)
    for (path, saved), loaded in zip(saved_leaves, restored_leaves, strict=True):
        if not np.array_equal(np.asarray(saved), np.asarray(loaded)):
            raise SystemExit(f'checkpoint mismatch at {jax.tree_util.keystr(path)}')
    count = sum(np.size(leaf) for leaf in restored_leaves)
    print(
        f'checkpoint: {directory} written at step {int(restored.step)} and read back; '
        f'all {len(restored_leaves)} arrays ({count:,} numbers) equal the saved state '
        'bit for bit. Training resumes from the restored copy.'
    )
    return restored


# ---------------------------------------------------------------------------- reports


def plot_curves(history: list[dict], resumed_at: int, path: Path) -> None:
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    epochs = [h['epoch'] for h in history]
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    ax_loss.plot(epochs, [h['train_loss'] for h in history], 'o-', label='train')
    ax_loss.plot(epochs, [h['test_loss'] for h in history], 's-', label='held-out')
    ax_loss.set(xlabel='epoch', ylabel='cross-entropy', title='loss', yscale='log')
    ax_acc.plot(epochs, [h['train_accuracy'] for h in history], 'o-', label='train')
    ax_acc.plot(epochs, [h['test_accuracy'] for h in history], 's-', label='held-out')
    ax_acc.set(xlabel='epoch', ylabel='accuracy', title='accuracy', ylim=(0, 1.01))
    for ax in (ax_loss, ax_acc):
        if 0 < resumed_at < len(history):
            ax.axvline(resumed_at + 0.5, color='grey', ls=':', label='checkpoint, resumed')
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle('linen CNN on scikit-learn digits')
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_report(path: Path, title: str, body: str) -> None:
    path.write_text(body + '\n')
    print(f'\n{title} ({path}):\n{body}')


def profile_report(out: Path, state: CNNState, costs, times, step_args: tuple):
    """The joined per-module report, the flame graph and the Perfetto trace of the train step.

    Joins, per module path, what each linen-profiling report measured: FLOPs and
    bytes split into forward, backward and remat recomputation (``module_costs``),
    device time per step (``profile``), parameter and Adam-state bytes
    (``module_memory``) and Python tracing time (``trace_times``).
    """
    memory = lp.module_memory(
        {'params': state.params, 'batch_stats': state.batch_stats}, state.opt_state
    )
    # The plain function: the jitted one has been traced already, and jit would
    # answer from its cache without running (and timing) a single Module method.
    trace = lp.trace_times(train_step_fn, *step_args)
    report = lp.Report.join(costs=costs, times=times, memory=memory, trace=trace)
    report_path = out / 'report.txt'
    write_report(report_path, 'joined report per module, one train step', str(report))
    (out / 'report.json').write_text(report.to_json(indent=1) + '\n')
    # Inclusive device time per module as an icicle chart: a PNG and a page that shows
    # each box's numbers on hover.
    title = 'Device time per module, one train step'
    flame_png = Path(lp.flame_graph(times, out / 'flame.png', value='seconds', title=title))
    flame_html = Path(lp.flame_graph(times, out / 'flame.html', value='seconds', title=title))
    print(f'\nflame graph: {flame_png} and {flame_html}')
    perfetto = Path(lp.perfetto_trace(times, out / 'perfetto.json'))
    print(f'Perfetto trace, one track per module: {perfetto} (open it in ui.perfetto.dev)')
    return report_path, flame_png, flame_html, perfetto


def run(args: argparse.Namespace, out: Path) -> dict:
    """The whole demo with parsed options; every output goes under ``out``."""
    started = time.perf_counter()
    print(f'jax {jax.__version__} on {jax.devices()[0].platform}; outputs in {out}')

    data = load_digits(args.seed)
    x_train, y_train, x_test, y_test = data
    print(f'data: {len(x_train)} training and {len(x_test)} held-out 8x8 digit images')
    model = CNN()
    init_key, dropout_key = jax.random.split(jax.random.key(args.seed))
    state = create_state(model, init_key, x_train[: args.batch_size], args.learning_rate)

    history: list[dict] = []
    # Train the first half, checkpoint, restore into a fresh copy, train the rest
    # from that copy: the run continues from what was read back, not from memory.
    first_half = max(1, args.epochs // 2)
    state = train_epochs(state, data, first_half, 0, args, dropout_key, history)
    checkpoint_dir = out / 'checkpoint'
    state = save_and_restore(state, checkpoint_dir)
    if args.epochs > first_half:
        state = train_epochs(
            state, data, args.epochs - first_half, first_half, args, dropout_key, history
        )

    _, test_accuracy = evaluate(state, x_test, y_test)
    test_accuracy = float(test_accuracy)
    print(f'\nheld-out accuracy: {test_accuracy:.2%} ({len(x_test)} images)')

    curves = out / 'curves.png'
    plot_curves(history, first_half, curves)
    print(f'training curves: {curves}')

    batch_x, batch_y = x_train[: args.batch_size], y_train[: args.batch_size]
    variables = {'params': state.params, 'batch_stats': state.batch_stats}
    costs = lp.module_costs(train_step, state, batch_x, batch_y, dropout_key)
    write_report(out / 'costs.txt', 'FLOPs and bytes per module, one train step', str(costs))
    summary = model.tabulate(
        jax.random.key(0),
        jnp.asarray(batch_x),
        train=False,
        # wide enough for the module paths; plain text for the report file
        console_kwargs={'width': 160, 'force_terminal': False},
    )
    write_report(out / 'summary.txt', 'summary (Module.tabulate)', summary)

    trace_dir = report_path = flame_png = flame_html = perfetto = None
    if args.profile:
        trace_dir = out / 'trace'
        times = lp.profile(
            train_step, state, batch_x, batch_y, dropout_key,
            steps=5, logdir=trace_dir, print_table=False,
        )  # fmt: skip
        write_report(out / 'times.txt', 'time per module, one train step (profiler)', str(times))
        print(
            f'\nprofiler trace: {trace_dir} (open with `tensorboard --logdir {trace_dir}` or XProf)'
        )
        report_path, flame_png, flame_html, perfetto = profile_report(
            out, state, costs, times, (state, batch_x, batch_y, dropout_key)
        )

    metrics = {
        'test_accuracy': test_accuracy,
        'epochs': args.epochs,
        'batch_size': args.batch_size,
        'checkpoint_epoch': first_half,
        'steps': int(state.step),
        'history': history,
        'checkpoint': str(checkpoint_dir),
        'curves': str(curves),
        'costs': str(out / 'costs.txt'),
        'summary': str(out / 'summary.txt'),
        'times': str(out / 'times.txt') if trace_dir else None,
        'trace': str(trace_dir) if trace_dir else None,
        'report': str(report_path) if report_path else None,
        'flame_png': str(flame_png) if flame_png else None,
        'flame_html': str(flame_html) if flame_html else None,
        'perfetto': str(perfetto) if perfetto else None,
        'variables': jax.tree_util.tree_map(lambda a: list(np.shape(a)), variables),
        'seconds': time.perf_counter() - started,
    }
    (out / 'metrics.json').write_text(json.dumps(metrics, indent=1))
    print(f'metrics: {out / "metrics.json"}')
    print(f'demo finished in {metrics["seconds"]:.0f} s: held-out accuracy {test_accuracy:.2%}')
    return metrics
