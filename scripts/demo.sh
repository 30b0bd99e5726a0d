#!/usr/bin/env bash
# The README's first command: sets everything up (scripts/setup.sh), runs the example notebooks headless in
# a real kernel, and leaves executed copies and HTML in demo-output/ (git-ignored).
# Environment: as for setup.sh (IPYSKILLS_SKIP_DOCKER=1 runs everything on the local backend).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
if [ "${IPYSKILLS_SKIP_DOCKER:-0}" = 1 ]; then export IPYSKILLS_BACKEND=local; fi

if ! .venv/bin/python -c "import jupyterlab" 2>/dev/null; then
    printf '\n==> installing JupyterLab into .venv (to open the results)\n'
    .venv/bin/python -m pip install -q "jupyterlab>=4.0"
fi

out=demo-output
rm -rf "$out"
mkdir -p "$out"
# The notebooks run in examples/ (their own folder, as in JupyterLab); this link lets the copies in
# demo-output/ find the same ./skills when re-run from there.
ln -s ../examples/skills "$out/skills"

printf '\n==> sandbox: '
if [ "${IPYSKILLS_BACKEND:-auto}" = local ]; then
    echo "local backend chosen (IPYSKILLS_BACKEND=local or IPYSKILLS_SKIP_DOCKER=1)"
elif .venv/bin/ipyskills sandbox status >/dev/null 2>&1; then
    echo "Docker engine and image ready; scripts run in fresh hardened containers"
else
    echo "Docker not ready; scripts run on the local backend (each result says what it isolated)"
fi

printf '\n==> running the example notebooks\n'
notebooks=(examples/quickstart.ipynb examples/authoring.ipynb examples/sandbox.ipynb)
for nb in examples/*.ipynb; do
    [[ " ${notebooks[*]} " == *" $nb "* ]] || notebooks+=("$nb")
done
status=0
.venv/bin/python scripts/run_notebooks.py --out "$out" "${notebooks[@]}" || status=$?

lab_flags=""
if [ "$(id -u)" = 0 ]; then lab_flags=" --allow-root"; fi  # JupyterLab refuses root without it
cat <<MSG

Executed notebooks and their HTML are in $out/:
$(cd "$out" && ls -1 -- *.ipynb *.html | sed 's/^/  /')

Open them in JupyterLab:   .venv/bin/jupyter lab$lab_flags $out/quickstart.ipynb
or read the HTML:          $out/quickstart.html
To run them yourself, open examples/*.ipynb in JupyterLab (kernel: Python 3 from .venv).
MSG
exit "$status"
