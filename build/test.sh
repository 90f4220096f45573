#!/usr/bin/env bash
# make test: every test, in two phases so that the first-run build of the
# real kube-apiserver (minutes of CPU, once per machine) overlaps the tests
# that do not need it.
#
#   phase 1: the kube-apiserver build starts in the background; meanwhile
#            the packages whose tests do not start one run, and e2e's tests
#            other than $KUBE_TESTS.
#   phase 2: once the build is done, the packages whose tests start a
#            kube-apiserver (found with go list: their test binaries import
#            e2e/kubeapi) and e2e's $KUBE_TESTS.
#
# A test that needs the apiserver and is left in phase 1 still passes: it
# waits for the build (tools/kube-apiserver/build.sh locks its cache).
# Tests are built as the binary is (CGO off, -trimpath), so they reuse the
# packages `make build` and the kube-apiserver build compiled. go test's own
# vet pass is off (-vet=off): it vets every dependency too, about 70 CPU
# seconds for store/... and ipam alone (docs/PERFORMANCE.md, CI budget);
# `make vet` runs the full go vet.
#
#   GO, TESTFLAGS   as in the Makefile
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GO="${GO:-go}"
read -r -a flags <<<"${TESTFLAGS:--timeout 30m -parallel 4}"
export CI="${CI:-true}" CGO_ENABLED=0
module="$($GO list -m)"

# e2e's top-level tests that start a kube-apiserver.
KUBE_TESTS='^(TestCNIK8s|TestCNIKDD|TestK8s|TestKDD|TestPolicyServices|TestQoS)'

prebuilt=false
[ -x "$(./tools/kube-apiserver/build.sh --path)" ] && prebuilt=true
kas_log="$(mktemp)"
failed="$(mktemp)"
trap 'rm -f "$kas_log" "$failed"' EXIT
./tools/kube-apiserver/build.sh >"$kas_log" 2>&1 &
kas=$!

kube_pkgs=()
other_pkgs=()
while IFS='|' read -r pkg deps; do
	case "$pkg" in *.test) ;; *) continue ;; esac
	pkg="${pkg%.test}"
	[ "$pkg" = "$module/e2e" ] && continue
	if [[ " $deps " == *" $module/e2e/kubeapi "* ]]; then
		kube_pkgs+=("$pkg")
	else
		other_pkgs+=("$pkg")
	fi
done < <($GO list -test -f '{{.ImportPath}}|{{join .Deps " "}}' ./...)
# Packages without tests have no .test binary: list them too (go test
# reports "no test files" and compiles them).
while read -r pkg; do
	[[ " ${kube_pkgs[*]} ${other_pkgs[*]} $module/e2e " == *" $pkg "* ]] || other_pkgs+=("$pkg")
done < <($GO list ./...)

status=0
run() { # go test args..., in the background; failures are remembered
	$GO test -trimpath -vet=off "${flags[@]}" "$@" || echo "$*" >>"$failed"
}
# phase E2E_FILTER PACKAGE...: the packages and e2e (its tests filtered by
# E2E_FILTER: -run or -skip and a regex, or nothing) side by side.
phase() {
	local filter=($1)
	shift
	run "$@" &
	local p1=$!
	run ./e2e "${filter[@]}" &
	wait $p1 $!
}

if $prebuilt; then
	wait $kas
	echo "== one phase: the kube-apiserver is already built"
	phase "" "${other_pkgs[@]}" "${kube_pkgs[@]}"
else
	echo "== phase 1: ${#other_pkgs[@]} packages and e2e without the kube-apiserver (building it meanwhile)"
	phase "-skip $KUBE_TESTS" "${other_pkgs[@]}"
	if ! wait $kas; then
		echo "kube-apiserver build failed:" >&2
		cat "$kas_log" >&2
	fi
	echo "== phase 2: ${#kube_pkgs[@]} packages and e2e with a kube-apiserver"
	phase "-run $KUBE_TESTS" "${kube_pkgs[@]}"
fi

if [ -s "$failed" ]; then
	echo "FAILED:" >&2
	sed 's/^/  go test /' "$failed" >&2
	status=1
fi
exit $status
