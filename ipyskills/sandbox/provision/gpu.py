"""GPU builds for a sandbox that has no GPU: PyTorch's CPU builds instead, or the CUDA build on request.

On Linux x86_64 the torch on PyPI is the CUDA build: about 0.9 GB of torch and 2.3 GB of `nvidia-*` and
`cuda-*` wheels that a sandbox without a GPU never uses. PyTorch publishes CPU builds on its own index,
and uv knows how to take just the torch family from there (`--torch-backend cpu`), everything else from
the configured index. So a resolve that brings CUDA wheels in through torch is done again that way, when
that index answers; when it does not (an offline mirror, a closed network), the refusal says so and what
to do. The setting `gpu_wheels` accepts the CUDA build as it is (it runs on the CPU; several GB).
"""

from __future__ import annotations

import re
import threading
import time
import urllib.error
import urllib.request
from dataclasses import replace

from ..wheels import Target, lock_names

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# Distributions that exist only to carry CUDA libraries (what a GPU build of torch, jax or cupy pulls in).
GPU_ONLY = re.compile(r"^(nvidia-.+|triton|cuda-.+|cupy-cuda.+|jax-cuda\d+-.+)$")
# What uv's torch backend takes from PyTorch's index (the family whose CPU builds live there).
TORCH_FAMILY = {"torch", "torchvision", "torchaudio", "torchtext", "torchdata", "torchrec", "torchao",
                "pytorch-triton"}
PROBE_TIMEOUT = 5.0
PROBE_TTL = 600.0  # seconds an answer about the CPU index is trusted

_probe_lock = threading.Lock()
_probed: dict[str, tuple[float, bool]] = {}


def gpu_only(names) -> list[str]:
    return sorted(n for n in names if GPU_ONLY.match(n))


def cpu_route(lock: str, target: Target, allow_gpu: bool, resolve, log) -> tuple[str, Target, str]:
    """(lock, target, note): when `lock` takes torch's CUDA build and the CUDA build is not accepted, the
    lock `resolve(target)` gives with PyTorch's CPU builds and that target (which the install must use
    too); otherwise the lock unchanged, with a note for the refusal when the CPU index cannot be reached."""
    names = lock_names(lock)
    torch = sorted(TORCH_FAMILY & set(names))
    cuda = gpu_only(names)
    if allow_gpu or not torch or not cuda or target.torch_backend:
        return lock, target, ""
    if not reachable(CPU_INDEX):
        return lock, target, (f"PyTorch's CPU builds ({CPU_INDEX}) could not be reached from here to use "
                              "instead")
    log(f"dependencies: {', '.join(torch)} resolved to the CUDA build ({len(cuda)} GPU-only distributions); "
        f"resolving again with PyTorch's CPU builds ({CPU_INDEX}, uv --torch-backend cpu)")
    cpu = replace(target, torch_backend="cpu")
    return resolve(cpu), cpu, ""


def reachable(url: str) -> bool:
    """Whether the index answers at all (any HTTP status counts), asked at most once per PROBE_TTL."""
    with _probe_lock:
        seen = _probed.get(url)
        if seen and time.monotonic() - seen[0] < PROBE_TTL:
            return seen[1]
    request = urllib.request.Request(url.rstrip("/") + "/torch/", method="HEAD",
                                     headers={"User-Agent": "ipyskills"})
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT):
            answer = True
    except urllib.error.HTTPError:
        answer = True  # it answered
    except (urllib.error.URLError, OSError, ValueError):
        answer = False
    with _probe_lock:
        _probed[url] = (time.monotonic(), answer)
    return answer
