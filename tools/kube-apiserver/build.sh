#!/usr/bin/env bash
# Build a real kube-apiserver for the tests (see e2e/kubeapi) from the
# k8s.io/kubernetes module pinned in this directory's go.mod, with CGO off,
# into a cache directory, only if it is not there yet. Prints the binary path.
#
#   KUBE_APISERVER_CACHE  the cache directory (default
#                         ${XDG_CACHE_HOME:-$HOME/.cache}/calico-aio/kube-apiserver-<version>)
#   build.sh --path       print the binary path and exit, building nothing
#
# A cold build takes a few minutes on 2 cores; concurrent callers wait for
# one another on a lock in the cache directory.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

version="$(sed -n 's#^\(require\)\{0,1\}[[:space:]]*k8s\.io/kubernetes \(v[^[:space:]]*\).*#\2#p' "$here/go.mod" | head -n1)"
if [ -z "$version" ]; then
	echo "build.sh: no k8s.io/kubernetes version in $here/go.mod" >&2
	exit 1
fi
dir="${KUBE_APISERVER_CACHE:-${XDG_CACHE_HOME:-${HOME:?}/.cache}/calico-aio/kube-apiserver-$version}"
bin="$dir/kube-apiserver"

if [ "${1:-}" = "--path" ]; then
	echo "$bin"
	exit 0
fi
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [ ! -x "$bin" ]; then # another caller may have built it while we waited
	echo "build.sh: building kube-apiserver $version into $dir (takes minutes)" >&2
	start=$SECONDS
	tmp="$(mktemp "$dir/.kube-apiserver.XXXXXX")"
	trap 'rm -f "$tmp"' EXIT
	(
		cd "$here"
		major="${version#v}" minor="${major#*.}"
		major="${major%%.*}" minor="${minor%%.*}"
		ldflags="-s -w"
		for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			ldflags="$ldflags -X $p.gitVersion=$version -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
		done
		CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags "$ldflags" \
			-o "$tmp" k8s.io/kubernetes/cmd/kube-apiserver
	) >&2
	chmod 0755 "$tmp"
	mv -f "$tmp" "$bin"
	trap - EXIT
	echo "build.sh: built in $((SECONDS - start))s" >&2
fi
echo "$bin"
