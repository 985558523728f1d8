#!/usr/bin/env bash
# Provision what the daemon tests need on a Debian 12 machine (run as root; idempotent):
# Docker Engine 28 with the containerd image store (zstd layers need it), the docker-registry
# and htpasswd programs (the test session runs two registries with them:
# tests/support/registries.py), a debootstrap'ed base image local/debian:bookworm, the buildx
# and compose CLI plugins, cosign (from trixie) and promtool/Prometheus. Prints the environment
# the tests read (eval it).
set -euo pipefail
state=${DOCKERGEN_TEST_STATE:-/tmp/dockergen-test}
mkdir -p "$state"

need=()
command -v docker-registry >/dev/null || need+=(docker-registry)
# the compile probe of the knowledge check compiles against real torch headers with g++
command -v g++ >/dev/null || need+=(g++)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v htpasswd >/dev/null || need+=(apache2-utils)
command -v promtool >/dev/null || need+=(prometheus)
command -v xz >/dev/null || need+=(xz-utils)
command -v gpgv >/dev/null || need+=(gpgv)
# bookworm's runc (1.1.5) and iptables run the engine below; nothing else of the engine
# comes from apt
command -v runc >/dev/null || need+=(runc)
command -v iptables >/dev/null || need+=(iptables)
if ((${#need[@]})); then
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
fi

mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
mirror=${mirror:-http://deb.debian.org/debian}
engine_prefix=${DOCKERGEN_ENGINE_PREFIX:-/opt/dockergen-engine}
source "$(dirname "$0")/engine.sh"
engine_start
docker=$engine_prefix/root/usr/bin/docker

# A full test run needs about 64 GiB more under the engine's roots at its peak (measured
# 2026-12-06 with the containerd image store, free space sampled every 10 s: 75 GiB free at
# the start, 11 GiB at the least, while the SGLang image, which now carries its JIT compiler
# and seeded cache, was tested; 57 GB before that; 40 GB with 20.10's overlay2 store on
# 2026-12-04): the real images from PyPI (tests/network/test_real_images*.py: each about
# 10 GB over its build stages, the store keeping an unpacked snapshot beside each compressed
# layer), uv's download cache, about 13 GB, which the stand-in builds start and both real
# builds fill, and the stand-in images. What a run creates is removed as it goes and at its
# end (tests/conftest.py). The check asks for the peak itself, no margin: a machine with
# less fails later anyway, and a margin would refuse machines that finish.
# Stop here with the reason, not minutes later in whichever test first meets ENOSPC.
# With the containerd image store the layers and snapshots live under containerd's root,
# BuildKit's cache and the containers under the engine's data root: both are measured (the
# smaller free space counts; on one file system they are the same number).
# (a remote or rootless engine's roots are not visible here: nothing to measure)
for root in "$("$docker" info -f '{{.DockerRootDir}}')" "$engine_data/containerd"; do
  [[ -d $root ]] || continue
  free_gib=$(( $(df -Pk "$root" | awk 'NR==2 {print $4}') / 1048576 ))
  if (( free_gib < ${DOCKERGEN_TEST_MIN_FREE_GIB:-64} )); then
    echo "provision: only ${free_gib} GiB free under $root; the tests need about 64 GiB." \
         "Free space (docker system df shows what the engine holds), then run this again." >&2
    exit 1
  fi
done

# buildx 0.29.1 and compose 2.40.3, from the same sid index as the engine
engine_plugins
"$docker" buildx version >&2
"$docker" compose version >&2

# cosign 2.5.0 from trixie, for the signing and verify tests (engine.sh: cosign_unpack)
cosign_unpack
"$engine_prefix/cosign/usr/bin/cosign" version 2>&1 | grep -E '^(GitVersion|GoVersion)' >&2

if ! "$docker" image inspect local/debian:bookworm >/dev/null 2>&1; then
  rm -rf "$state/rootfs"
  debootstrap --variant=minbase bookworm "$state/rootfs" "$mirror" >"$state/debootstrap.log" 2>&1
  tar -C "$state/rootfs" -c . | "$docker" import - local/debian:bookworm >&2
  rm -rf "$state/rootfs"
fi

# The two registries (anonymous on 127.0.0.1:5000, htpasswd on 127.0.0.1:5001) are started by
# the test session itself, which also starts one again if it stops (tests/support/registries.py).
echo "export DOCKERGEN_TEST_STATE=$state"
# sid's docker CLI (28.5.2) first on PATH: the tests run `docker buildx`/`docker compose`
echo "export PATH=$engine_prefix/root/usr/bin:\$PATH"
# the cosign the signing tests and `dockergen build --sign`/`verify` run (DOCKERGEN_COSIGN)
echo "export DOCKERGEN_COSIGN=$engine_prefix/cosign/usr/bin/cosign"
