#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# pyenv.sh - build (once) the cached virtualenv of current PyTorch, Lightning,
# Accelerate and JAX that the e2e suite and the sbatch templates run.
# Usage: scripts/pyenv.sh            build it if needed; print its python on stdout
#        scripts/pyenv.sh --print    print it only if already built (else exit 1)
# Env: DPG_PYENV_CACHE (default /var/cache/dpg/pyenv), DPG_PYENV_PYTHON
# (default /usr/bin/python3).  The environment lives in CACHE/<key>, key = hash of
# tests/python/requirements.txt and the base python's version, so a second run
# reuses it and a change of pins builds a new one (older ones are removed).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
req=$top/tests/python/requirements.txt
cache=${DPG_PYENV_CACHE:-/var/cache/dpg/pyenv}
base=${DPG_PYENV_PYTHON:-/usr/bin/python3}

die() { echo "pyenv: $*" >&2; exit 1; }
[ -x "$base" ] || die "no base python at $base: apt-get install python3 python3-venv"
"$base" -c 'import venv, ensurepip' 2>/dev/null || die "$base has no venv module: apt-get install python3-venv"
key=$({ cat "$req"; "$base" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-12)
env=$cache/$key
py=$env/bin/python

if [ "${1:-}" = --print ]; then
	[ -f "$env/.complete" ] && [ -x "$py" ] && echo "$py" && exit 0
	echo "pyenv: not built yet (run scripts/pyenv.sh)" >&2
	exit 1
fi
if [ -f "$env/.complete" ] && [ -x "$py" ]; then
	echo "pyenv: reusing $env ($(cat "$env/.complete"))" >&2
	echo "$py"
	exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9   # two runs on one machine build it once
if [ ! -f "$env/.complete" ]; then
	t0=$SECONDS
	rm -rf "$env" "$env.tmp"
	echo "pyenv: building $env from $req (first run downloads about 4 GB from PyPI)" >&2
	"$base" -m venv "$env" >&2   # no .complete yet: an interrupted build is redone
	"$py" -m pip install -q --disable-pip-version-check --upgrade pip >&2
	"$py" -m pip install --disable-pip-version-check --progress-bar off -r "$req" >&2 ||
		{ rm -rf "$env"; die "pip install failed (is PyPI reachable? see the lines above)"; }
	"$py" -m pip freeze >"$env/freeze.txt"
	"$py" - <<'PY' >&2 || { rm -rf "$env"; die "the environment does not import its clients"; }
import torch, torch.distributed as d, lightning, accelerate, jax
assert d.is_gloo_available(), "torch without gloo"
print("pyenv: torch", torch.__version__, "lightning", lightning.__version__,
      "accelerate", accelerate.__version__, "jax", jax.__version__)
PY
	size=$(du -sh "$env" | cut -f1)
	echo "built in $((SECONDS - t0)) s, $size" >"$env/.complete"
	echo "pyenv: $(cat "$env/.complete")" >&2
	# environments of older pins are of no use any more
	for old in "$cache"/*/; do
		old=${old%/}
		[ "$old" = "$env" ] || rm -rf "$old"
	done
fi
echo "$py"
