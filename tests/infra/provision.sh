#!/usr/bin/env bash
# Provision what the daemon tests need on a Debian 12 machine (run as root; idempotent):
# Debian's docker.io engine, two docker-registry instances (anonymous on 127.0.0.1:5000,
# htpasswd-authenticated on 127.0.0.1:5001), a debootstrap'ed base image
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

# A full test run needs about 45 GiB under the engine's root at its peak: the real vLLM or
# SGLang image from PyPI (about 10 GB), its build stages and uv's download cache
# (tests/network/test_real_images*.py, one engine at a time), plus the stand-in builds (measured
# 2026-12-01; what a run creates is removed as it goes and at its end, tests/conftest.py).
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

start_registry() {  # name port [htpasswd]
  local name=$1 port=$2 auth=${3:-}
  if curl -s -o /dev/null "http://127.0.0.1:$port/v2/"; then return; fi
  mkdir -p "$state/$name"
  {
    echo "version: 0.1"
    echo "storage: {filesystem: {rootdirectory: $state/$name/data}, delete: {enabled: true}}"
    echo "http: {addr: 127.0.0.1:$port}"
    if [[ -n $auth ]]; then
      echo "auth: {htpasswd: {realm: dockergen-test, path: $auth}}"
    fi
  } >"$state/$name/config.yml"
  (setsid docker-registry serve "$state/$name/config.yml" >"$state/$name/log" 2>&1 &)
  for _ in $(seq 1 30); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v2/" || true)
    [[ $code == 200 || $code == 401 ]] && return
    sleep 0.5
  done
  cat "$state/$name/log" >&2; exit 1
}
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

user=dgtest pass=dgtest-secret-pass
htpasswd -Bbn "$user" "$pass" >"$state/htpasswd"
start_registry registry-anon 5000
start_registry registry-auth 5001 "$state/htpasswd"

if ! /usr/bin/docker image inspect local/debian:bookworm >/dev/null 2>&1; then
  rm -rf "$state/rootfs"
  debootstrap --variant=minbase bookworm "$state/rootfs" "$mirror" >"$state/debootstrap.log" 2>&1
  tar -C "$state/rootfs" -c . | /usr/bin/docker import - local/debian:bookworm >&2
  rm -rf "$state/rootfs"
fi

echo "export DOCKERGEN_TEST_REGISTRY=localhost:5000"
echo "export DOCKERGEN_TEST_AUTH_REGISTRY=localhost:5001"
echo "export DOCKERGEN_TEST_AUTH_USER=$user"
echo "export DOCKERGEN_TEST_AUTH_PASS=$pass"
