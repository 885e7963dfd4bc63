"""quantscope: see, exactly, what int8 quantization does to a tensor.

``import quantscope`` gives the NumPy engine only; it never imports Qt, so the engine can be
used as a library on a server or in a notebook. The window lives in ``quantscope.gui``.
"""

from quantscope.core import *  # noqa: F403
from quantscope.core import __all__ as _core_all

__all__ = list(_core_all)
__version__ = "0.1.0"
