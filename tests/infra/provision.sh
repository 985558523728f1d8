#!/usr/bin/env bash
# Provision what the daemon tests need on a Debian 12 machine (run as root; idempotent):
# Debian's docker.io engine, two docker-registry instances (anonymous on 127.0.0.1:5000,
# htpasswd-authenticated on 127.0.0.1:5001) and a debootstrap'ed base image
# local/debian:bookworm. Prints the environment the tests read (eval it).
set -euo pipefail
state=${DOCKERGEN_TEST_STATE:-/tmp/dockergen-test}
mkdir -p "$state"

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v docker-registry >/dev/null || need+=(docker-registry)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v htpasswd >/dev/null || need+=(apache2-utils)
if ((${#need[@]})); then
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
fi

if ! /usr/bin/docker version >/dev/null 2>&1; then
  (setsid dockerd >"$state/dockerd.log" 2>&1 &)
  for _ in $(seq 1 60); do /usr/bin/docker version >/dev/null 2>&1 && break; sleep 1; done
  /usr/bin/docker version >/dev/null || { cat "$state/dockerd.log" >&2; exit 1; }
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
user=dgtest pass=dgtest-secret-pass
htpasswd -Bbn "$user" "$pass" >"$state/htpasswd"
start_registry registry-anon 5000
start_registry registry-auth 5001 "$state/htpasswd"

if ! /usr/bin/docker image inspect local/debian:bookworm >/dev/null 2>&1; then
  mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
  mirror=${mirror:-http://deb.debian.org/debian}
  rm -rf "$state/rootfs"
  debootstrap --variant=minbase bookworm "$state/rootfs" "$mirror" >"$state/debootstrap.log" 2>&1
  tar -C "$state/rootfs" -c . | /usr/bin/docker import - local/debian:bookworm >&2
  rm -rf "$state/rootfs"
fi

echo "export DOCKERGEN_TEST_REGISTRY=localhost:5000"
echo "export DOCKERGEN_TEST_AUTH_REGISTRY=localhost:5001"
echo "export DOCKERGEN_TEST_AUTH_USER=$user"
echo "export DOCKERGEN_TEST_AUTH_PASS=$pass"
