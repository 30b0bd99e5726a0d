"""A Python interpreter started before its script is known: a warm container's launcher starts it ahead of
the job as `python3 -c <this source> FD`, and once the job names a Python script it becomes that script's
process, as if it had been started as `python3 /path/to/script.py ARGS`.

Never imported on the host: the source travels in the container's command. Why it exists: starting an
interpreter is most of a warm run's time under gVisor (measured here: `python3 -c pass` 54 ms under runsc,
9 ms under runc, inside the container), and the launcher can pay for it while the container waits.

What makes it the same process a fresh start would be (tests/sandbox/test_prestarted.py compares them):
- the launcher only hands over a job that fits: `python3 /abs/path.py ...`, and every variable Python
  reads while starting (PYTHON*, LC_*, LANG, LANGUAGE, HOME, PATH) as this interpreter was started with,
  and the same RLIMIT_NPROC; anything else is started fresh, and this one exits on an empty job;
- it imports nothing that a fresh start has not already imported (os, sys, marshal and the frozen
  importlib are loaded at start-up), then takes the job's working directory and environment, sets
  sys.argv, sys.orig_argv and sys.path[0] (the script's folder, after following the file's own links, as
  Python does), and runs the script's code in a fresh `__main__` namespace with `__file__`, `__cached__`
  and a SourceFileLoader, in the order Python sets them;
- an exception that ends the script reaches sys.excepthook (whichever the script installed) without this
  code's frames, and Python's own handling of it follows: exit 1, or SIGINT for KeyboardInterrupt;
  SystemExit is Python's own.
What still tells it apart: /proc/self/cmdline shows this command, not the script's.

WARM_UP: before waiting, it compiles a throw-away snippet, so the compiler's code is paged in while the
container waits rather than on the script's time (a page fault costs far more under gVisor than under
runc); the compiled snippet is dropped and nothing else of it stays.
"""

_initial = dict(globals())  # __main__ as Python made it, before anything here is defined


def _take_job():
    import marshal
    import os
    import sys

    fd = int(sys.argv[1])
    compile("def f(a, *b, **c):\n    return [a, b, c]\n", "<string>", "exec")  # see WARM_UP below
    chunks = []
    while True:
        piece = os.read(fd, 65536)
        if not piece:
            break
        chunks.append(piece)
    os.close(fd)
    if not chunks:
        os._exit(0)  # the launcher started the script another way
    argv, env, cwd = marshal.loads(b"".join(chunks))
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    path = real = argv[1]
    while os.path.islink(real):  # Python follows the script file's own links for sys.path[0]
        real = os.path.join(os.path.dirname(real), os.readlink(real))
    sys.path[0] = os.path.dirname(real)
    sys.argv = list(argv[1:])
    sys.orig_argv = list(argv)
    with open(path, "rb") as fh:
        return path, fh.read()


def _run(initial):
    import sys
    from _frozen_importlib_external import SourceFileLoader

    path, source = _take_job()
    main = globals()
    main.clear()
    fresh = {"__doc__": None, "__loader__": SourceFileLoader("__main__", path)}  # not this source's
    for key, value in initial.items():  # the keys in Python's order, then the two a script adds
        main[key] = fresh.get(key, value)
    main["__file__"], main["__cached__"] = path, None
    try:
        exec(compile(source, path, "exec", dont_inherit=True), main)
    except SystemExit:
        raise
    except BaseException:
        hook = sys.excepthook

        def without_these_frames(kind, value, tb):
            sys.excepthook = hook
            while tb is not None and tb.tb_frame.f_code.co_filename == "<string>":
                tb = tb.tb_next
            if isinstance(value, BaseException):  # Python's own hook prints the exception's traceback
                value.__traceback__ = tb
            hook(kind, value, tb)

        sys.excepthook = without_these_frames
        raise


_run(_initial)
