"""`numba.cuda`, imported on first use: the kernel modules' `cuda` name.

Importing numba.cuda costs about a second (the CUDA bindings, ml_dtypes, its typing registry) on
every machine, with or without a GPU, and every query process imports the kernel modules for their
CPU twins. Here `cuda.jit` records the Python function and returns a `LazyKernel`; numba.cuda is
imported, and the kernel built with the real `cuda.jit`, the first time it is launched, called or
inspected (`py_func`, for the PTX check). Any other attribute (`cuda.to_device`, `cuda.device_array`,
...) imports numba.cuda and forwards to it. Under the simulator (`NUMBA_ENABLE_CUDASIM=1`) the real
module is the simulator's, as with a plain `from numba import cuda`.

Before a kernel is built, the function's `cuda` global becomes the real module and every
`LazyKernel` it reaches (a global or closure variable: its device functions) is replaced by its
built dispatcher, so numba types the body exactly as if `from numba import cuda` had run at import.
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import threading
import types
from typing import Any, Callable

_lock = threading.RLock()


def numba_cuda() -> types.ModuleType:
    """The real numba.cuda module (imported now if it is not yet)."""
    from numba import cuda as module

    return module


class LazyKernel:
    """A `cuda.jit` kernel or device function, built on first use (module doc)."""

    def __init__(self, function: Callable, options: dict[str, Any]):
        self._function = function
        self._options = options
        self._built: Any = None
        self.__name__ = getattr(function, "__name__", "kernel")
        self.__doc__ = function.__doc__

    def build(self) -> Any:
        """The numba.cuda dispatcher of this function, built now if it is not yet."""
        if self._built is None:
            with _lock:
                if self._built is None:
                    module = numba_cuda()
                    _resolve(self._function, module)
                    self._built = module.jit(**self._options)(self._function)
        return self._built

    @property
    def py_func(self) -> Callable:
        """The Python function, its globals resolved (what `cuda.compile_ptx` is given)."""
        self.build()
        return self._function

    def __getitem__(self, launch: Any) -> Any:
        return self.build()[launch]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.build()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.build(), name)

    def __repr__(self) -> str:
        return f"<LazyKernel {self.__name__} ({'built' if self._built is not None else 'not built'})>"


def _resolve(function: Callable, module: types.ModuleType) -> None:
    """Point `function`'s `cuda` global at the real module and its LazyKernel globals and closure
    variables at their built dispatchers (device functions are built before the kernel using them)."""
    namespace = function.__globals__
    for name in function.__code__.co_names:
        value = namespace.get(name)
        if value is cuda:
            namespace[name] = module
        elif isinstance(value, LazyKernel):
            namespace[name] = value.build()
    for cell in function.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(value, LazyKernel):
            cell.cell_contents = value.build()
        elif value is cuda:
            cell.cell_contents = module


class _LazyCuda:
    """Stands for numba.cuda in a kernel module (module doc)."""

    def jit(self, function: Callable | None = None, **options: Any) -> Any:
        if function is None:
            return lambda f: LazyKernel(f, options)
        return LazyKernel(function, options)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(numba_cuda(), name)


#: the `cuda` of the kernel modules: `from .lazy_cuda import cuda`
cuda = _LazyCuda()
