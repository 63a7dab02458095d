"""Kiln: a JIT inference runtime for convolutional networks on x86 CPUs.

Kiln loads an ONNX model, generates kernels for each layer's exact shape and this CPU, measures
them (remembering the times in a tuning cache) and runs the fastest whole-network plan::

    import kiln, numpy as np
    with kiln.Session("model.onnx", threads=2) as s:
        x = np.random.default_rng(0).standard_normal(s.inputs[0].shape, dtype=np.float32)
        y = s.run({s.inputs[0].name: x})[s.outputs[0].name]

The package wraps Kiln's public C API (libkiln.so): errors carry its status codes and
messages, and concurrent ``run`` calls on one session are safe (the GIL is released while a
model loads and runs). Kiln logs warnings to stderr as ``[kiln W] ...``; ``log_level`` sets a
session's level, the environment variable ``KILN_LOG_LEVEL`` the default.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _kiln

__all__ = [
    "Error",
    "InvalidArgument",
    "InvalidModel",
    "Unsupported",
    "ShapeMismatch",
    "IoError",
    "OutOfMemory",
    "Internal",
    "TensorInfo",
    "Session",
    "__version__",
]

#: The library's version, as ``kiln_version()`` returns it.
__version__: str = _kiln.version()


class Error(Exception):
    """Base class of every error Kiln raises.

    ``code`` is the C API's ``kiln_code`` (an int) and ``message`` its message, which names the
    argument, file, input or node at fault. One subclass per code.
    """

    code: int

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(Error, ValueError):
    """A bad call: an option out of range, a missing or unknown name, a closed session."""


class InvalidModel(Error):
    """The model is malformed, truncated or inconsistent."""


class Unsupported(Error):
    """Valid ONNX that Kiln does not implement (an operator, attribute or dtype)."""


class ShapeMismatch(Error, ValueError):
    """An array's shape or dtype does not match the model's input or output."""


class IoError(Error, OSError):
    """A file could not be read or written."""


class OutOfMemory(Error, MemoryError):
    """Kiln could not allocate memory."""


class Internal(Error):
    """A bug in Kiln; please report it with the message."""


# Sets each class's `code` from the C header's kiln_code values.
_kiln.set_error_types({c.__name__: c for c in (InvalidArgument, InvalidModel, Unsupported,
                                                 ShapeMismatch, IoError, OutOfMemory, Internal)})


class TensorInfo(NamedTuple):
    """A model input or output: its name, static shape (as loaded: the batch and the ``shapes``
    option are fixed at load; run() also takes inputs of another batch) and dtype."""

    name: str
    shape: Tuple[int, ...]
    dtype: np.dtype


PathLike = Union[str, "os.PathLike[str]"]
Feeds = Union[Mapping[str, np.ndarray], Sequence[np.ndarray]]


class _ModelBytes(NamedTuple):
    data: Any


class Session:
    """A loaded model, ready to run.

    Loading generates and measures kernels (a few seconds for a large model on a cold tuning
    cache; a warm load skips the measurements). Options, by name (the C ``kiln_options``):

    threads: worker threads; 0 = every CPU this process may run on.
    strategy: how kernels and layouts are chosen: 'global' (the whole-network optimum of kernel
        and layout-conversion times), 'local' (each node's fastest), 'fixed' (one blocked
        layout, direct convolution), 'heuristic' (the cost model only, nothing measured).
    tune: what is measured at load: 'none', 'fast' or 'full'.
    accuracy: 'default' (Winograd layers only while their added error stays within 6e-5 of the
        output's largest value), 'strict' (no Winograd) or 'fast' (no check).
    precision: 'f32' (exact, the default) or 'bf16' (convolutions with a bf16 kernel may
        compute in bf16 with f32 accumulation where the CPU has AVX512-BF16 and it is faster;
        inputs, outputs and other ops stay f32).
    batch: the batch size to fix a symbolic batch to; 0 = the model's (symbolic becomes 1).
    shapes: {input name: shape} set at load, e.g. {"input": (1, 3, 320, 320)}: every dim of
        the input. Symbolic dims other than the batch must be given; fixed ones may be changed
        where the model takes it (a fully convolutional network takes any height and width).
        An unknown name, a dim < 1 or a disagreeing batch raise InvalidArgument; a wrong rank
        or a size the model cannot take ShapeMismatch (naming the input, dim and node).
    max_isa: None (the best the CPU has) or a cap: 'scalar', 'avx2' or 'avx512'.
    log_level: None (KILN_LOG_LEVEL, else 'warn') or 'trace', 'debug', 'info', 'warn',
        'error', 'critical', 'off'.
    cache_dir: the tuning cache's folder; None = $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln,
        else ~/.cache/kiln.
    disable_cache: True: neither read nor write the tuning cache.
    profile_budget_ms: the wall-clock time a load may spend measuring; 0 = the default (10 s
        with tune='fast', 60 s with 'full').

    A bad option value raises InvalidArgument (a ValueError) naming the allowed values; a model
    that cannot be loaded raises IoError, InvalidModel or Unsupported.

    ``run`` may be called from several threads at once. A session is a context manager;
    ``close()`` releases it (waiting for runs in progress), after which run, plan, bench and isa
    raise InvalidArgument (inputs and outputs stay readable).
    """

    def __init__(
        self,
        path: Union[PathLike, _ModelBytes],
        *,
        threads: int = 0,
        strategy: str = "global",
        tune: str = "fast",
        accuracy: str = "default",
        precision: str = "f32",
        batch: int = 0,
        max_isa: Optional[str] = None,
        log_level: Optional[str] = None,
        cache_dir: Optional[PathLike] = None,
        disable_cache: bool = False,
        profile_budget_ms: float = 0.0,
        shapes: Optional[Mapping[str, Sequence[int]]] = None,
    ) -> None:
        from_bytes = isinstance(path, _ModelBytes)
        source = path.data if isinstance(path, _ModelBytes) else os.fspath(path)
        self._model = None if isinstance(path, _ModelBytes) else os.fsdecode(path)
        self._threads = threads
        self._s = _kiln.Session(
            source,
            from_bytes,
            threads=threads,
            log_level=log_level,
            batch=batch,
            cache_dir=None if cache_dir is None else os.fspath(cache_dir),
            tune=tune,
            max_isa=max_isa,
            strategy=strategy,
            disable_cache=bool(disable_cache),
            profile_budget_ms=profile_budget_ms,
            accuracy=accuracy,
            precision=precision,
            shapes={name: [int(d) for d in dims] for name, dims in (shapes or {}).items()},
        )
        self._inputs = [TensorInfo(*t) for t in self._s.io(True)]
        self._outputs = [TensorInfo(*t) for t in self._s.io(False)]

    @classmethod
    def from_bytes(cls, data: Union[bytes, bytearray, memoryview], **options: Any) -> "Session":
        """Loads a model from the bytes of an ONNX file; the options are Session()'s."""
        return cls(_ModelBytes(data), **options)

    @property
    def inputs(self) -> List[TensorInfo]:
        """The model's inputs, in order."""
        return list(self._inputs)

    @property
    def outputs(self) -> List[TensorInfo]:
        """The model's outputs, in order."""
        return list(self._outputs)

    @property
    def isa(self) -> str:
        """The instruction set the kernels were generated for: 'avx512', 'avx2' or 'scalar'."""
        return self._s.isa()

    @property
    def closed(self) -> bool:
        """True once close() was called."""
        return self._s.closed

    def run(self, feeds: Feeds, out: Optional[Feeds] = None) -> Dict[str, np.ndarray]:
        """Runs the model once and returns {output name: array}.

        feeds: a dict {input name: array} or a list of arrays in input order. Each array must
        be a numpy.ndarray of the input's dtype (float32, int64 or bool; nothing is converted) and
        shape, C-contiguous and aligned to its element size. Dim 0 (the batch) may differ from
        the loaded shape, the same in every input: the first run at a new batch plans it
        (about a load's time; the plan is kept, up to 8 batches) and the outputs have it.

        out: optional arrays to write the outputs into, by name (some or all outputs) or a list
        of all of them; the same checks, and writeable. They are returned as they are (no
        copy); outputs not given are allocated. A model whose output sizes depend on the data
        (NonMaxSuppression, NonZero: shapes with -1 in ``outputs``) returns new arrays of each
        run's sizes, takes no ``out`` and runs at the loaded input shapes only.

        Raises ShapeMismatch (a ValueError) for a wrong dtype or shape, InvalidArgument for a
        missing or unknown name, a non-contiguous, misaligned or read-only array, or outputs
        sharing memory with each other or an input; TypeError for what is not an array.
        """
        return self._s.run(feeds, out)

    def plan(self) -> Dict[str, Any]:
        """The chosen plan, as `kiln plan` shows it: the selection's summary ("isa", "threads",
        "strategy", "tune", "accuracy", "predicted_ms", "optimal", ...) and "steps", one per
        plan step in run order ("op", "label", "family", "layouts", "kernel", ...)."""
        return json.loads(self._s.plan_json())

    def bench(self, runs: int = 50, warmup: int = 5, inputs: Optional[Feeds] = None,
              layers: bool = False) -> Dict[str, Any]:
        """Times the model: `warmup` untimed runs, then `runs` timed ones.

        The runs are timed in a loop inside the extension around the C call, with the GIL
        released: Kiln's latency without Python's per-call overhead, as `kiln bench` measures
        it. inputs: as for run(); None = random normal float32 data (fixed seed; int64 inputs
        are zero). Returns the latency part of `kiln bench --json`: latency_ms (p50, p90, p99,
        min, max, mean, stddev), inferences_per_s, runs, warmup, threads (as asked; 0 = every
        CPU), threads_used, isa, batch, machine (CPU, ISA, cores, Kiln's version and build id);
        with layers=True also "layers" (each plan step's median time over `runs` profiled runs
        on random inputs, as `kiln bench --layers`), layers_total_ms, reference_ms (the time
        in scalar reference kernels) and tail_ms (of it, the nodes run per run after the plan
        in a model whose output sizes depend on the data; 0 for others).
        """
        if inputs is None:
            rng = np.random.default_rng(42)
            inputs = [rng.standard_normal(t.shape, dtype=np.float32) if t.dtype == np.float32
                      else np.zeros(t.shape, t.dtype) for t in self._inputs]
        ms = np.asarray(self._s.time_runs(inputs, runs, warmup))
        first = self._inputs[0].shape if self._inputs else ()
        result: Dict[str, Any] = {
            "model": self._model,
            "machine": json.loads(_kiln.machine_json()),
            "threads": self._threads,
            "threads_used": self.plan()["threads"],
            "isa": self.isa,
            "batch": first[0] if first else 0,
            "runs": runs,
            "warmup": warmup,
            "latency_ms": {
                "p50": float(np.percentile(ms, 50)),
                "p90": float(np.percentile(ms, 90)),
                "p99": float(np.percentile(ms, 99)),
                "min": float(ms.min()),
                "max": float(ms.max()),
                "mean": float(ms.mean()),
                "stddev": float(ms.std()),
            },
            "inferences_per_s": 1e3 * len(ms) / float(ms.sum()),
        }
        if layers:
            prof = json.loads(self._s.profile_json(runs))
            result["layers_total_ms"] = prof["total_ms"]
            result["reference_ms"] = prof["reference_ms"]
            result["tail_ms"] = prof["tail_ms"]
            result["layers"] = prof["layers"]
        return result

    def close(self) -> None:
        """Releases the session once runs in progress have finished. Closing twice is fine."""
        self._s.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self.closed:
            return "<kiln.Session (closed)>"
        ins = ", ".join(f"{t.name}{list(t.shape)}" for t in self._inputs)
        outs = ", ".join(f"{t.name}{list(t.shape)}" for t in self._outputs)
        return f"<kiln.Session {ins} -> {outs} on {self.isa}>"
