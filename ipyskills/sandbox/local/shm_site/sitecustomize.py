"""Run by every Python process of a local-backend run that has no /dev/shm of its own (see
ipyskills/sandbox/local/shm.py): multiprocessing's semaphores, shared memory and heap arenas live in
IPYSKILLS_SHM_DIR, a folder of the run's. Then the sitecustomize this one shadows runs, if there is one."""

import os
import sys


def _install(folder):
    import ctypes
    import mmap

    import _multiprocessing

    libc = ctypes.CDLL(None, use_errno=True)
    sem_size = 32  # sizeof(sem_t) on 64-bit glibc (x86_64, aarch64)
    base = _multiprocessing.SemLock

    def path_of(prefix, name):
        bare = name.lstrip("/")
        if not bare or "/" in bare:
            raise OSError(22, "Invalid argument", name)
        return os.path.join(folder, prefix + bare)

    def mapped(path, create, value=0):
        fd = os.open(path, os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0), 0o600)
        try:
            if create:
                os.ftruncate(fd, sem_size)
            region = mmap.mmap(fd, sem_size)
        finally:
            os.close(fd)
        address = ctypes.addressof(ctypes.c_char.from_buffer(region))
        if create and libc.sem_init(ctypes.c_void_p(address), 1, ctypes.c_uint(value)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return region, address

    class SemLock(base):
        """A multiprocessing semaphore in a file of the run's folder; pickled (for spawn and forkserver
        children) by name, and mapped again there."""

        def __new__(cls, kind, value, maxvalue, name, unlink):
            path = path_of("sem.", name)
            region, address = mapped(path, True, value)
            if unlink:
                os.unlink(path)
            self = super()._rebuild(address, kind, maxvalue, None)
            self._region, self._name = region, None if unlink else name
            return self

        def __init__(self, *args, **kwargs):
            pass

        @property
        def name(self):
            return self._name

        @classmethod
        def _rebuild(cls, handle, kind, maxvalue, name):
            if name is None:
                return super()._rebuild(handle, kind, maxvalue, None)
            region, address = mapped(path_of("sem.", name), False)
            self = super()._rebuild(address, kind, maxvalue, None)
            self._region, self._name = region, name
            return self

    def sem_unlink(name):
        os.unlink(path_of("sem.", name))

    _multiprocessing.SemLock = SemLock
    _multiprocessing.sem_unlink = sem_unlink
    try:
        import _posixshmem
    except ImportError:
        pass
    else:
        def shm_open(path, flags, mode=0o777):
            return os.open(path_of("", path), flags | os.O_NOFOLLOW, mode)

        def shm_unlink(path):
            os.unlink(path_of("", path))

        _posixshmem.shm_open, _posixshmem.shm_unlink = shm_open, shm_unlink

    class _HeapFolder:
        """multiprocessing.heap picks /dev/shm for its arenas on Linux: the run's folder instead."""

        def find_spec(self, fullname, path=None, target=None):
            if fullname != "multiprocessing.heap":
                return None
            import importlib.machinery

            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is None or spec.loader is None:
                return None
            real = spec.loader.exec_module

            def exec_module(module):
                real(module)
                module.Arena._dir_candidates = [folder]

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _HeapFolder())


def _chain():
    """Run the sitecustomize this file shadows (a venv's, the distribution's), as Python would have."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_folder = os.environ.get("IPYSKILLS_SHM_DIR")
if _folder and os.path.isdir(_folder):
    try:
        _install(_folder)
    except Exception as _exc:  # noqa: BLE001 - multiprocessing then fails as it would have
        sys.stderr.write(f"ipyskills: multiprocessing's shared memory could not be set up: {_exc}\n")
_chain()
