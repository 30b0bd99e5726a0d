#!/usr/bin/env python3
"""Execute notebooks headless in a real kernel (this Python), keep executed copies and HTML, print a summary.

    .venv/bin/python scripts/run_notebooks.py --out demo-output examples/*.ipynb

Each notebook runs with the folder given by --cwd as its working directory (default: the notebook's own
folder, as JupyterLab does). The kernel is always the interpreter running this script, whatever
kernelspecs the machine has. Exit code 0 when every notebook ran clean, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

KERNEL_NAME = "ipyskills-python"
_BACKEND_LINE = re.compile(r"\bbackend[=:]\s*(docker|local)\b|\bran on the (docker|local) backend\b")
# The start of a Docker run's isolation line (containers.isolation_line), with its gVisor part if any.
_DOCKER_ISOLATION = re.compile(r"\bdocker(?: \(warm pool\))?(?: API, [^:\n]*?)?"
                               r"(, gVisor \([^)]*\) kernel, not the host's; inside it)?: uid \d+")


@contextmanager
def kernel_for_this_python():
    """(kernel name, scratch folder): a kernelspec naming sys.executable, found first on JUPYTER_PATH
    while the block runs."""
    with tempfile.TemporaryDirectory(prefix="ipyskills-kernel-") as tmp:
        spec_dir = Path(tmp) / "kernels" / KERNEL_NAME
        spec_dir.mkdir(parents=True)
        spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (ipykernel)", "language": "python"}
        (spec_dir / "kernel.json").write_text(json.dumps(spec))
        old = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = tmp + (os.pathsep + old if old else "")
        try:
            yield KERNEL_NAME, tmp
        finally:
            if old is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = old


def execute(path: Path, cwd: Path | None = None, timeout: int = 300):
    """(executed notebook, error text or None). The notebook keeps the outputs of the cells that ran."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
    from traitlets.config import Config

    nb = nbformat.read(path, as_version=4)
    kernelspec = nb.metadata.get("kernelspec")
    with kernel_for_this_python() as (kernel_name, tmp):
        # IPC sockets (absolute paths, so none land in the notebook's folder): the kernel is local, and
        # ipykernel warns about unencrypted TCP. nbclient creates and shuts down the kernel itself.
        config = Config({"KernelManager": {"transport": "ipc", "ip": os.path.join(tmp, "kernel-ipc")}})
        client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name, config=config,
                                resources={"metadata": {"path": str(cwd or path.parent)}})
        error = None
        try:
            client.execute()
        except CellExecutionError as exc:
            error = f"{exc.ename}: {exc.evalue}"
        except (CellTimeoutError, DeadKernelError) as exc:
            error = f"{type(exc).__name__}: {str(exc).strip().partition(chr(10))[0]}"
    if kernelspec is not None:
        nb.metadata["kernelspec"] = kernelspec  # the copy opens with the usual kernel in JupyterLab
    return nb, error


def text_outputs(nb) -> str:
    """Everything the notebook printed or displayed as text, in order (for summaries and tests)."""
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                parts.append(out.get("text", ""))
            elif out.get("output_type") in ("execute_result", "display_data"):
                parts.append(out.get("data", {}).get("text/plain", ""))
            elif out.get("output_type") == "error":
                parts.append("\n".join(out.get("traceback", [])))
    return "\n".join(parts)


def backends_seen(nb) -> list[str]:
    return sorted({a or b for a, b in _BACKEND_LINE.findall(text_outputs(nb))})


def docker_runtimes_seen(nb) -> list[str]:
    """The runtimes the Docker runs' isolation lines name: "gVisor" (runtime runsc) or "runc"."""
    return sorted({"gVisor" if gvisor else "runc" for gvisor in _DOCKER_ISOLATION.findall(text_outputs(nb))})


def write_html(nb, target: Path) -> None:
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    target.write_text(body, encoding="utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="folder for the executed copies and HTML")
    parser.add_argument("--cwd", type=Path, default=None, help="working directory of every notebook")
    parser.add_argument("--timeout", type=int, default=300, help="seconds one cell may take")
    args = parser.parse_args(argv)

    import nbformat

    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for path in args.notebooks:
        started = time.monotonic()
        nb, error = execute(path, cwd=args.cwd, timeout=args.timeout)
        executed = args.out / path.name
        nbformat.write(nb, executed)
        write_html(nb, executed.with_suffix(".html"))
        seconds = time.monotonic() - started
        backends = ", ".join(backends_seen(nb)) or "(none printed)"
        if docker_runtimes_seen(nb):
            backends += f" ({', '.join(docker_runtimes_seen(nb))})"
        if error:
            failed += 1
            print(f"FAILED {path.name} after {seconds:.0f} s: {error}")
        else:
            print(f"ok     {path.name:28} {seconds:5.1f} s   backend: {backends}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
