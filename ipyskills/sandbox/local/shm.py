"""multiprocessing without a private /dev/shm: Python's semaphores and shared memory in the run's folder.

Without a mount namespace the local backend cannot give a run a /dev/shm of its own, and Landlock keeps the
host's out of reach (its files, those of the user's other processes among them, could not be told from
the run's). glibc's sem_open() and shm_open() know no other folder, so multiprocessing.Lock() failed there.

Instead, the helper (sandbox/local/isolation.py) puts `shm_site/sitecustomize.py` first on the script's
PYTHONPATH, with IPYSKILLS_SHM_DIR naming a folder inside the run folder. In each Python process of the
run, that module makes multiprocessing's semaphores (`_multiprocessing.SemLock`) process-shared POSIX
semaphores (sem_init) in files mapped from that folder, its shared memory (`_posixshmem.shm_open`) files
there, and its heap arenas (multiprocessing.Value/Array) files there too; then it runs the sitecustomize
it shadows, if any. The files go with the run folder. It is no confinement: it only points Python at a
place the run may use. Programs that call sem_open() or shm_open() themselves still find /dev/shm closed.
"""

import os

SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shm_site", "sitecustomize.py")


def site_text():
    """The sitecustomize's text (read by the helper before Landlock closes the package's folder)."""
    try:
        with open(SITE) as fh:
            return fh.read()
    except OSError:
        return None


def prepare(work, env, text):
    """Make `work`/shm and `work`/.shm-site (with `text` as its sitecustomize) and point `env` at them.
    Returns '' or why not."""
    if text is None:
        return f"{SITE} is not readable"
    folder, site = os.path.join(work, "shm"), os.path.join(work, ".shm-site")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        os.makedirs(site, mode=0o700, exist_ok=True)
        with open(os.path.join(site, "sitecustomize.py"), "w") as fh:
            fh.write(text)
    except OSError as exc:
        return exc.strerror or str(exc)
    env["IPYSKILLS_SHM_DIR"] = folder
    env["PYTHONPATH"] = site + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return ""
