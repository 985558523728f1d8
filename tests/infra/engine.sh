# Docker Engine 28 for the daemon tests, sourced by provision.sh (which sets state, mirror and
# engine_prefix). Debian 12 packages only Engine 20.10 (BuildKit 0.8: no zstd layers, no
# SOURCE_DATE_EPOCH); Debian sid carries 28.5.2. Installing sid's packages with apt would pull
# sid's libc, so the .debs named in sid's Packages index (checked against the signed
# InRelease and their sha256) are unpacked with dpkg-deb into a private prefix; bookworm's
# runc 1.1.5 and iptables run it (shared/reference/platform-notes.md, "Docker Engine 28 on
# Debian 12"). The system is not upgraded.
#
# It is the machine's only engine, on the default socket /var/run/docker.sock with the default
# bridge docker0: the tests, docker-py and the docker CLI find it without DOCKER_HOST. Its
# containerd, data and exec roots are its own (under /var/lib and /run/dockergen-engine), so
# a bookworm containerd or dockerd installed later does not share state with it. It runs the
# containerd image store ("containerd-snapshotter"): only that store writes zstd layers (the
# overlay2 store's exporter ignores the compression), and the profile's layer compression
# defaults to zstd.

# sid's packages, pinned by version: sid moves on, and a new engine is a change to review,
# not something a CI run picks up by itself.
engine_pins=(
  "docker.io 28.5.2+dfsg4-"
  "containerd 2.1.9+ds1-"
  "tini-static 0.19.0-"
  "docker-cli 28.5.2+dfsg4-"
  "docker-buildx 0.29.1+ds1-"
  "docker-compose 2.40.3-"
)
engine_data=/var/lib/dockergen-engine
engine_run=/run/dockergen-engine
engine_socket=/var/run/docker.sock

engine_unpack() {
  # sid's signed index, then each pinned .deb checked against it, unpacked into the prefix
  local debs=$state/debs/sid index=$state/debs/sid/Packages.xz sum want pkg prefix file version
  [[ -x $engine_prefix/root/usr/sbin/dockerd && -f $engine_prefix/root/.complete ]] && return 0
  mkdir -p "$debs"
  curl -fsS -o "$debs/InRelease" "$mirror/dists/sid/InRelease"
  gpgv --keyring /usr/share/keyrings/debian-archive-keyring.gpg "$debs/InRelease" 2>/dev/null \
    || { echo "provision: sid's InRelease from $mirror has no valid Debian signature" >&2; exit 1; }
  want=$(awk '$3 == "main/binary-amd64/Packages.xz" {s = $1} END {print s}' "$debs/InRelease")
  curl -fsS -o "$index" "$mirror/dists/sid/main/binary-amd64/Packages.xz"
  echo "$want  $index" | sha256sum -c --quiet - >&2
  rm -rf "$engine_prefix/root" && mkdir -p "$engine_prefix/root"
  for pin in "${engine_pins[@]}"; do
    read -r pkg prefix <<<"$pin"
    read -r file version sum < <(xz -dc "$index" | awk -v p="$pkg" '
      $1 == "Package:" {hit = ($2 == p)} hit && $1 == "Version:" {v = $2}
      hit && $1 == "Filename:" {f = $2} hit && $1 == "SHA256:" {print f, v, $2; exit}')
    if [[ $version != "$prefix"* ]]; then
      echo "provision: sid now carries $pkg ${version:-(none)}, not the pinned $prefix*;" \
           "run the daemon tests on it, then update engine_pins in tests/infra/engine.sh." >&2
      exit 1
    fi
    curl -fsS -o "$debs/$pkg.deb" "$mirror/$file"
    echo "$sum  $debs/$pkg.deb" | sha256sum -c --quiet - >&2
    dpkg-deb -x "$debs/$pkg.deb" "$engine_prefix/root"
  done
  touch "$engine_prefix/root/.complete"
}

engine_config() {
  # containerd 2.1 with config version 3: the Kubernetes (CRI) and NRI plugins are not needed
  # by dockerd, and the CRI ones fail on this machine; exec/data roots of its own
  mkdir -p "$engine_prefix/etc" "$engine_data" "$engine_run"
  cat >"$engine_prefix/etc/containerd.toml" <<EOF
version = 3
root = "$engine_data/containerd"
state = "$engine_run/containerd"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.images",
                    "io.containerd.cri.v1.runtime", "io.containerd.nri.v1.nri"]
[grpc]
  address = "$engine_run/containerd.sock"
EOF
  cat >"$engine_prefix/etc/daemon.json" <<EOF
{
  "hosts": ["unix://$engine_socket"],
  "containerd": "$engine_run/containerd.sock",
  "data-root": "$engine_data/docker",
  "exec-root": "$engine_run/docker",
  "pidfile": "$engine_run/dockerd.pid",
  "init-path": "$engine_prefix/root/usr/bin/tini-static",
  "userland-proxy-path": "$engine_prefix/root/usr/sbin/docker-proxy",
  "features": {"containerd-snapshotter": true}
}
EOF
}

engine_wait() {  # $1: what to wait for (a command), $2: its log
  for _ in $(seq 1 60); do "${@:3}" >/dev/null 2>&1 && return 0; sleep 1; done
  echo "provision: $1 did not start; the end of $2:" >&2
  tail -n 30 "$2" >&2
  exit 1
}

engine_start() {
  # A second run finds the engine answering and reuses it; an engine on the socket that is not
  # this one (e.g. Debian's 20.10) is reported, not stopped: it is not this script's to end.
  local docker=$engine_prefix/root/usr/bin/docker server store
  local path=$engine_prefix/root/usr/bin:$engine_prefix/root/usr/sbin:$PATH
  engine_unpack
  if [[ -S $engine_socket ]] &&
     server=$("$docker" -H "unix://$engine_socket" version -f '{{.Server.Version}}' 2>/dev/null); then
    store=$("$docker" -H "unix://$engine_socket" info -f '{{range .DriverStatus}}{{index . 1}} {{end}}')
    if [[ $server != 28.5.2* || $store != *io.containerd.snapshotter.v1* ]]; then
      echo "provision: $engine_socket answers as Docker Engine $server (store: $store), not 28.5.2" \
           "with the containerd image store. Stop that engine, then run this again." >&2
      exit 1
    fi
    return 0
  fi
  engine_config
  if ! [[ -S $engine_run/containerd.sock ]] || \
     ! "$engine_prefix/root/usr/bin/ctr" -a "$engine_run/containerd.sock" version >/dev/null 2>&1; then
    (PATH=$path setsid "$engine_prefix/root/usr/bin/containerd" \
       --config "$engine_prefix/etc/containerd.toml" >"$state/containerd.log" 2>&1 &)
    engine_wait containerd "$state/containerd.log" \
      "$engine_prefix/root/usr/bin/ctr" -a "$engine_run/containerd.sock" version
  fi
  (PATH=$path setsid "$engine_prefix/root/usr/sbin/dockerd" \
     --config-file "$engine_prefix/etc/daemon.json" >"$state/dockerd.log" 2>&1 &)
  engine_wait dockerd "$state/dockerd.log" "$docker" -H "unix://$engine_socket" version
}

engine_plugins() {
  # buildx and compose from the same sid index, in the CLI's system plugin folder: every docker
  # CLI searches it, whatever DOCKER_CONFIG says (the tests point DOCKER_CONFIG at folders of
  # their own credentials, where a DOCKER_CONFIG/cli-plugins would not be)
  local plugins=/usr/local/lib/docker/cli-plugins pkg
  mkdir -p "$plugins"
  for pkg in docker-buildx docker-compose; do
    cmp -s "$engine_prefix/root/usr/libexec/docker/cli-plugins/$pkg" "$plugins/$pkg" ||
      install -m 0755 "$engine_prefix/root/usr/libexec/docker/cli-plugins/$pkg" "$plugins/$pkg"
  done
}

# cosign from Debian trixie's suite (a static Go binary: no libc of trixie's comes with it),
# pinned by version like the engine: the signing tests run the real cosign against the local
# registry. Unpacked into its own prefix (never apt-installed: that would pull trixie's libc).
cosign_pin="cosign 2.5.0-"
cosign_unpack() {
  local debs=$state/debs/trixie index=$state/debs/trixie/Packages.xz want pkg prefix file version sum
  local root=$engine_prefix/cosign
  [[ -x $root/usr/bin/cosign && -f $root/.complete ]] && return 0
  mkdir -p "$debs"
  curl -fsS -o "$debs/InRelease" "$mirror/dists/trixie/InRelease"
  gpgv --keyring /usr/share/keyrings/debian-archive-keyring.gpg "$debs/InRelease" 2>/dev/null \
    || { echo "provision: trixie's InRelease from $mirror has no valid Debian signature" >&2; exit 1; }
  want=$(awk '$3 == "main/binary-amd64/Packages.xz" {s = $1} END {print s}' "$debs/InRelease")
  curl -fsS -o "$index" "$mirror/dists/trixie/main/binary-amd64/Packages.xz"
  echo "$want  $index" | sha256sum -c --quiet - >&2
  read -r pkg prefix <<<"$cosign_pin"
  read -r file version sum < <(xz -dc "$index" | awk -v p="$pkg" '
    $1 == "Package:" {hit = ($2 == p)} hit && $1 == "Version:" {v = $2}
    hit && $1 == "Filename:" {f = $2} hit && $1 == "SHA256:" {print f, v, $2; exit}')
  if [[ $version != "$prefix"* ]]; then
    echo "provision: trixie now carries $pkg ${version:-(none)}, not the pinned $prefix*;" \
         "run the signing tests on it, then update cosign_pin in tests/infra/engine.sh." >&2
    exit 1
  fi
  curl -fsS -o "$debs/$pkg.deb" "$mirror/$file"
  echo "$sum  $debs/$pkg.deb" | sha256sum -c --quiet - >&2
  rm -rf "$root" && mkdir -p "$root"
  dpkg-deb -x "$debs/$pkg.deb" "$root"
  touch "$root/.complete"
}
