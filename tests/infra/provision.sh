#!/usr/bin/env bash
# Provision what the daemon tests need on a Debian 12 machine (run as root; idempotent):
# Docker Engine 28 with the containerd image store (zstd layers need it), the docker-registry
# and htpasswd programs (the test session runs two registries with them:
# tests/support/registries.py), a debootstrap'ed base image local/debian:bookworm for linux/amd64
# and linux/arm64 (one multi-platform image: a profile's base resolves for both platforms of
# an index), qemu-user-static registered in binfmt_misc (the arm64 builds and smoke tests run
# under emulation), the buildx and compose CLI plugins, cosign (from trixie) and
# promtool/Prometheus. Prints the environment the tests read (eval it), and nothing else on
# stdout.
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
# aarch64 under emulation: Debian 12's qemu 7.2 registers qemu-aarch64 with the F
# (fix-binary) flag, so containers run arm64 programs without an interpreter inside
command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static)
command -v update-binfmts >/dev/null || need+=(binfmt-support)
if ((${#need[@]})); then
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
fi

# binfmt_misc is not mounted in every container or VM; the packages register nothing then
if [[ ! -e /proc/sys/fs/binfmt_misc/register ]]; then
  mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc >&2
fi
if [[ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]]; then
  update-binfmts --enable qemu-aarch64 >&2
fi
grep -q '^flags: .*F' /proc/sys/fs/binfmt_misc/qemu-aarch64 || {
  echo "provision: qemu-aarch64 is registered without the fix-binary flag (F); containers" \
       "cannot run arm64 programs: reinstall qemu-user-static" >&2
  exit 1
}

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

# local/debian:bookworm is one image for both platforms: each platform's debootstrap'ed root
# (arm64's second stage runs under qemu, about 80 s) imported as local/debian:bookworm-ARCH
# (single-platform images: what tests that push a plain manifest tag), then joined into one
# multi-platform image (the containerd image store keeps the index) by a build whose only
# instruction is FROM the platform's own import: the layers stay those of the import. A
# single-platform local/debian:bookworm of an earlier provisioning becomes the amd64 part.
base_for() {  # ARCH: local/debian:bookworm-ARCH, imported once
  local arch=$1
  "$docker" image inspect "local/debian:bookworm-$arch" >/dev/null 2>&1 && return
  if [[ $arch == amd64 ]] &&
     "$docker" image inspect local/debian:bookworm >/dev/null 2>&1 &&
     ! "$docker" image inspect --platform linux/arm64 local/debian:bookworm >/dev/null 2>&1; then
    "$docker" tag local/debian:bookworm local/debian:bookworm-amd64 >&2
    return
  fi
  rm -rf "$state/rootfs-$arch"
  debootstrap --arch "$arch" --variant=minbase bookworm "$state/rootfs-$arch" "$mirror" \
    >"$state/debootstrap-$arch.log" 2>&1
  tar -C "$state/rootfs-$arch" -c . |
    "$docker" import --platform "linux/$arch" - "local/debian:bookworm-$arch" >&2
  rm -rf "$state/rootfs-$arch"
}
base_for amd64
base_for arm64
if ! "$docker" image inspect --platform linux/arm64 local/debian:bookworm >/dev/null 2>&1 ||
   ! "$docker" image inspect --platform linux/amd64 local/debian:bookworm >/dev/null 2>&1; then
  join=$(mktemp -d)
  printf 'ARG TARGETARCH\nFROM local/debian:bookworm-${TARGETARCH}\n' >"$join/Dockerfile"
  "$docker" buildx build --builder default --provenance=false --sbom=false \
    --platform linux/amd64,linux/arm64 -t local/debian:bookworm "$join" >&2 2>&1
  rm -rf "$join"
fi

# The two registries (anonymous on 127.0.0.1:5000, htpasswd on 127.0.0.1:5001) are started by
# the test session itself, which also starts one again if it stops (tests/support/registries.py).
echo "export DOCKERGEN_TEST_STATE=$state"
# sid's docker CLI (28.5.2) first on PATH: the tests run `docker buildx`/`docker compose`
echo "export PATH=$engine_prefix/root/usr/bin:\$PATH"
# the cosign the signing tests and `dockergen build --sign`/`verify` run (DOCKERGEN_COSIGN)
echo "export DOCKERGEN_COSIGN=$engine_prefix/cosign/usr/bin/cosign"
