"""What one provisioning may bring in: a cap on the number of distributions and on their download size,
checked after resolving and before anything is downloaded, and a clear word about GPU builds.

A bare `import torch` resolves on PyPI to the CUDA build with about twenty `nvidia-*` wheels, several GB,
for a sandbox that has no GPU. Provisioning first tries PyTorch's CPU builds instead (provision.gpu);
what still holds CUDA wheels is refused with its size and what to do, never downloaded by surprise,
unless the budget accepts GPU builds (setting gpu_wheels).

Sizes come from the index's JSON simple API (PEP 691 with the PEP 700 `size` field), one request per new
distribution, several at a time; an index that does not give them is not size-checked, and the progress
says so. The count is always checked.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ...errors import ProvisionError
from .gpu import GPU_ONLY

LOOKUPS_AT_ONCE = 8


@dataclass(frozen=True)
class Budget:
    max_count: int = 100  # distributions one provisioning may add
    max_bytes: int = 2 * 1024**3  # their total download size
    allow_gpu: bool = False  # accept CUDA builds (they run on the CPU here) instead of refusing them

    def describe(self) -> str:
        return f"at most {self.max_count} distributions and {self.max_bytes / 1024**3:.1f} GB"


def check(lock: str, installed: list[str], budget: Budget, log, gpu_note: str = "") -> None:
    """Raise ProvisionError when the distributions to add (`installed`, "name==version") are over the
    budget or are GPU-only builds that the budget does not accept; `lock` holds their hashes (to find each
    file's size). `gpu_note`: why no CPU build was taken instead, for the refusal."""
    gpu = [spec for spec in installed if GPU_ONLY.match(spec.split("==", 1)[0])]
    sizes = _sizes(lock, installed, log) if installed else {}
    total = sum(sizes.values())
    known = f", {_gb(total)} to download" if sizes else ""
    if gpu and not budget.allow_gpu:
        gpu_size = sum(sizes.get(spec, 0) for spec in gpu)
        raise ProvisionError(
            f"the requirements resolve to {len(gpu)} GPU-only distribution(s) ({', '.join(gpu[:4])}"
            f"{' …' if len(gpu) > 4 else ''}{', ' + _gb(gpu_size) if gpu_size else ''}{known and ' of' + known[1:]}"
            f"), and the sandbox has no GPU{'; ' + gpu_note if gpu_note else ''}. Make that index reachable, "
            "configure an index with CPU builds as an extra index (UV_EXTRA_INDEX_URL, with "
            "UV_INDEX_STRATEGY=unsafe-best-match), declare a CPU build of the package, or accept the CUDA "
            "build, which runs on the CPU (setting gpu_wheels, IPYSKILLS_GPU_WHEELS=1"
            f"{f'; it needs deps_max_size of at least {_gb(total)}' if total > budget.max_bytes else ''})")
    if gpu:
        log(f"dependencies: accepting {len(gpu)} GPU-only distribution(s) "
            f"({_gb(sum(sizes.get(spec, 0) for spec in gpu))}) although the sandbox has no GPU (gpu_wheels)")
    if len(installed) > budget.max_count:
        raise ProvisionError(
            f"the requirements resolve to {len(installed)} new distributions{known}, over the budget of "
            f"{budget.max_count} (setting deps_max_count, IPYSKILLS_DEPS_MAX_COUNT): raise it if this "
            "is expected, or declare fewer or lighter packages")
    if total > budget.max_bytes:
        biggest = sorted(sizes.items(), key=lambda kv: -kv[1])[:3]
        raise ProvisionError(
            f"the requirements resolve to {len(installed)} new distributions, {_gb(total)} to download, over "
            f"the budget of {_gb(budget.max_bytes)} (setting deps_max_size, IPYSKILLS_DEPS_MAX_SIZE); the "
            f"largest: {', '.join(f'{name} {_gb(size)}' for name, size in biggest)}")
    if installed:
        log(f"dependencies: {len(installed)} distribution(s){known or ' (the index gives no sizes)'}, "
            f"within the budget ({budget.describe()})")


def _gb(size: int) -> str:
    return f"{size / 1024**3:.2f} GB" if size >= 1024**3 / 10 else f"{size / 1024**2:.1f} MB"


def _hashes(lock: str) -> dict[str, set[str]]:
    """"name==version" -> its sha256 hashes, from a lock text."""
    from ..wheels import normalize

    out: dict[str, set[str]] = {}
    current = None
    for line in lock.splitlines():
        body = line.strip()
        m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", body)
        if m and not line[0].isspace():
            current = f"{normalize(m.group(1))}=={m.group(2)}"
            out[current] = set()
        for digest in re.findall(r"--hash=sha256:([0-9a-f]{64})", body):
            if current:
                out[current].add(digest)
    return out


def _sizes(lock: str, installed: list[str], log) -> dict[str, int]:
    """"name==version" -> the size of its largest locked file, for those the index says; {} when it
    gives none (the size check is then skipped)."""
    hashes = _hashes(lock)
    wanted = [spec for spec in installed if hashes.get(spec)]
    with ThreadPoolExecutor(max_workers=LOOKUPS_AT_ONCE) as pool:
        found = dict(zip(wanted, pool.map(lambda spec: _size_of(spec, hashes[spec]), wanted)))
    sizes = {spec: size for spec, size in found.items() if size is not None}
    if wanted and len(sizes) < len(wanted):
        log(f"  the index gave no file sizes for {len(wanted) - len(sizes)} distribution(s): their size is "
            "not counted")
    return sizes


def _size_of(spec: str, digests: set[str]) -> int | None:
    from .sdist import index_url

    name = spec.split("==", 1)[0]
    page = urllib.parse.urljoin(index_url(), f"{name}/")
    request = urllib.request.Request(page, headers={"Accept": "application/vnd.pypi.simple.v1+json",
                                                    "User-Agent": "ipyskills"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            if "json" not in response.headers.get("Content-Type", ""):
                return None
            files = json.loads(response.read(32 * 1024**2))["files"]
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
        return None
    locked = [f for f in files if isinstance(f, dict) and (f.get("hashes") or {}).get("sha256") in digests
              and isinstance(f.get("size"), int)]
    # a lock may hold the hashes of every platform's wheel: count the one this machine's sandbox takes
    import platform

    arch = "aarch64" if platform.machine().lower() in ("aarch64", "arm64") else "x86_64"
    fitting = [f for f in locked if str(f.get("filename", "")).endswith("-none-any.whl")
               or (arch in str(f.get("filename", "")) and "linux" in str(f.get("filename", ""))
                   and re.search(r"-(cp311|abi3|py3)", str(f.get("filename", ""))))]
    sizes = [f["size"] for f in fitting or locked]
    return max(sizes) if sizes else None
