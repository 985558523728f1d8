#!/usr/bin/env bash
# Provision what the daemon tests need on a Debian 12 machine (run as root; idempotent):
# Debian's docker.io engine, the docker-registry and htpasswd programs (the test session runs
# two registries with them: tests/support/registries.py), a debootstrap'ed base image
# local/debian:bookworm, the buildx and compose CLI plugins (static binaries from Debian's
# trixie suite: Debian 12 packages neither) and promtool/Prometheus. Prints the environment
# the tests read (eval it).
set -euo pipefail
state=${DOCKERGEN_TEST_STATE:-/tmp/dockergen-test}
mkdir -p "$state"

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v docker-registry >/dev/null || need+=(docker-registry)
# the compile probe of the knowledge check compiles against real torch headers with g++
command -v g++ >/dev/null || need+=(g++)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v htpasswd >/dev/null || need+=(apache2-utils)
command -v promtool >/dev/null || need+=(prometheus)
command -v xz >/dev/null || need+=(xz-utils)
if ((${#need[@]})); then
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
fi

if ! /usr/bin/docker version >/dev/null 2>&1; then
  (setsid dockerd >"$state/dockerd.log" 2>&1 &)
  for _ in $(seq 1 60); do /usr/bin/docker version >/dev/null 2>&1 && break; sleep 1; done
  /usr/bin/docker version >/dev/null || { cat "$state/dockerd.log" >&2; exit 1; }
fi

# A full test run needs about 40 GB more under the engine's root at its peak (measured
# 2026-12-04): the build of the real SGLang image from PyPI (its image is about 10 GB, over its
# build stages; vLLM's, built and removed before it, needs less), uv's download cache, about
# 13 GB, which the stand-in builds start and both real builds fill
# (tests/network/test_real_images*.py), and the stand-in images. What a run creates is removed
# as it goes and at its end (tests/conftest.py). 50 GiB (54 GB) leaves about 14 GB of margin.
# Stop here with the reason, not minutes later in whichever test first meets ENOSPC.
root=$(/usr/bin/docker info -f '{{.DockerRootDir}}')
# (a remote or rootless engine's root is not visible here: nothing to measure)
if [[ -d $root ]]; then
  free_gib=$(( $(df -Pk "$root" | awk 'NR==2 {print $4}') / 1048576 ))
  if (( free_gib < ${DOCKERGEN_TEST_MIN_FREE_GIB:-50} )); then
    echo "provision: only ${free_gib} GiB free under $root; the tests need about 50 GiB." \
         "Free space (docker system df shows what the engine holds), then run this again." >&2
    exit 1
  fi
fi

# buildx and compose: the same Debian mirror's trixie suite carries them as static Go
# binaries that work with Debian 12's dockerd 20.10 (shared/reference/platform-notes.md).
# Taken from the suite's signed Packages index (file name and sha256), unpacked with
# dpkg-deb into the docker CLI's system plugin folder; the system is not upgraded.
plugins=/usr/local/lib/docker/cli-plugins
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
mirror=${mirror:-http://deb.debian.org/debian}
if [[ ! -x $plugins/docker-buildx || ! -x $plugins/docker-compose ]]; then
  mkdir -p "$plugins" "$state/debs"
  curl -fsS -o "$state/debs/Packages.xz" "$mirror/dists/trixie/main/binary-amd64/Packages.xz"
  for pkg in docker-buildx docker-compose; do
    read -r file sum < <(xz -dc "$state/debs/Packages.xz" | awk -v p="$pkg" '
      $1 == "Package:" {hit = ($2 == p)} hit && $1 == "Filename:" {f = $2}
      hit && $1 == "SHA256:" {print f, $2; exit}')
    curl -fsS -o "$state/debs/$pkg.deb" "$mirror/$file"
    echo "$sum  $state/debs/$pkg.deb" | sha256sum -c --quiet - >&2
    rm -rf "$state/debs/$pkg" && dpkg-deb -x "$state/debs/$pkg.deb" "$state/debs/$pkg"
    install -m 0755 "$state/debs/$pkg/usr/libexec/docker/cli-plugins/$pkg" "$plugins/$pkg"
  done
fi
docker buildx version >&2
docker compose version >&2

if ! /usr/bin/docker image inspect local/debian:bookworm >/dev/null 2>&1; then
  rm -rf "$state/rootfs"
  debootstrap --variant=minbase bookworm "$state/rootfs" "$mirror" >"$state/debootstrap.log" 2>&1
  tar -C "$state/rootfs" -c . | /usr/bin/docker import - local/debian:bookworm >&2
  rm -rf "$state/rootfs"
fi

# The two registries (anonymous on 127.0.0.1:5000, htpasswd on 127.0.0.1:5001) are started by
# the test session itself, which also starts one again if it stops (tests/support/registries.py).
echo "export DOCKERGEN_TEST_STATE=$state"
