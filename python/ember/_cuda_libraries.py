"""Loads the CUDA libraries of NVIDIA's Python wheels (those PyTorch installs) before ember's own, so that
ember and PyTorch in one process share one copy of each.

The dynamic loader binds a library to the first copy loaded under its soname. Without this, ``import
ember`` first loads the toolkit's libnccl.so.2 (or cuBLAS, cuDNN), and a later ``import torch`` binds its
libtorch_cuda to that copy, which may lack what PyTorch's newer one has: with CUDA 13.0's NCCL and
PyTorch 2.15, ``undefined symbol: ncclCommResume``. Loaded from the wheels first, both use the wheels'
copies, which within one CUDA major version are backward compatible with the toolkit ember was built
with as long as they are not older than it. Nothing is loaded when ember was built without CUDA, no such
wheel is installed, or EMBER_CUDA_LIBRARIES=toolkit asks for the toolkit's copies (for wheels older than
the toolkit, which may lack a function ember calls: the import then fails naming it).
"""

import ctypes
import importlib.util
import os
import re

# ember's CUDA libraries, each after those it needs. Any major version a wheel has is loaded: one that
# ember was not built against has another soname and stays unused.
_LIBRARIES = ["libcudart.so", "libcublasLt.so", "libcublas.so", "libcudnn.so", "libnccl.so"]


def _wheel_library_dirs():
    """The lib/ folders of the installed nvidia.* wheels (nvidia/cu13/lib, nvidia/cudnn/lib, ...)."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    dirs = []
    for root in spec.submodule_search_locations:
        for package in sorted(os.listdir(root)):
            lib = os.path.join(root, package, "lib")
            if os.path.isdir(lib):
                dirs.append(lib)
    return dirs


def preload():
    """Loads each of ember's CUDA libraries that a wheel provides, globally; returns the paths loaded."""
    loaded = []
    if os.environ.get("EMBER_CUDA_LIBRARIES") == "toolkit":
        return loaded
    dirs = _wheel_library_dirs()
    for stem in _LIBRARIES:
        for d in dirs:
            # Versioned names only (libcudnn.so.9, not libcudnn.so.9.1.0 twice): what DT_NEEDED names.
            for name in sorted(n for n in os.listdir(d) if re.fullmatch(re.escape(stem) + r"\.\d+", n)):
                path = os.path.join(d, name)
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                loaded.append(path)
    return loaded
