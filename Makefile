# calico-aio: one static binary that is the Calico CNI plugin, IPAM plugin,
# node agent and calicoctl.

GO        ?= go
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
PKG       := github.com/calico-aio/calico-aio
LDFLAGS   := -s -w -X $(PKG)/build/version.Version=$(VERSION)
ROLES     := calico calico-ipam calico-node calicoctl
# Every build here (the binary, the tests, the binaries e2e builds, the
# test kube-apiserver) compiles without DWARF: the binary is linked with -s
# -w anyway, stack traces do not need it, and it is about 13% of the
# compiler's CPU. The same flags everywhere let the builds share GOCACHE.
GOFLAGS   ?= -gcflags=all=-dwarf=false
export GOFLAGS
# -parallel 4: the e2e tests that run in parallel mostly wait (agents
# converging, grace periods), so four at a time fit on two cores.
TESTFLAGS ?= -timeout 30m -parallel 4
# The e2e benchmarks run one after another in one test binary, well over
# go test's default 10-minute timeout.
BENCHFLAGS ?= -timeout 3h
# System packages the tests and the demo need, as "command:debian-package".
SYSDEPS   := iptables:iptables ipset:ipset ip:iproute2 ping:iputils-ping conntrack:conntrack sysctl:procps bird:bird2 nft:nftables curl:curl
# What only `make bench` needs on top.
BENCHDEPS := iperf3:iperf3

.PHONY: all build deps test test-unit bench demo demo-clean fmt vet clean kube-apiserver crds

all: build

## build: static binary bin/calico-aio plus a symlink for each role.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/calico-aio .
	@./build/check-static.sh $(BIN)/calico-aio
	@for r in $(ROLES); do ln -sf calico-aio $(BIN)/$$r; done

## deps: install missing system packages with apt-get (needs root).
deps:
	@missing=""; for d in $(SYSDEPS); do \
		cmd=$${d%%:*}; pkg=$${d#*:}; \
		command -v $$cmd >/dev/null 2>&1 || missing="$$missing $$pkg"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

## crds: regenerate build/k8s/crds.yaml (Calico's CRDs) and store/kube/testdata/crds-v3.yaml (the v3 test CRDs) from the recorded field list.
crds:
	$(GO) run ./build/crdgen -o build/k8s/crds.yaml
	$(GO) run ./build/crdgen -group projectcalico.org/v3 -o store/kube/testdata/crds-v3.yaml

## kube-apiserver: build (once, cached outside the tree) the real kube-apiserver e2e/kubeapi runs.
kube-apiserver:
	./tools/kube-apiserver/build.sh

## test: everything CI runs: unit, kernel (root, namespaces) and e2e tests
## (build/test.sh: the first-run kube-apiserver build overlaps the tests that
## do not need it).
test: deps build
	GO='$(GO)' TESTFLAGS='$(TESTFLAGS)' ./build/test.sh

## test-unit: the quick tests that need neither root nor system packages.
test-unit:
	$(GO) test -short ./...

## bench: performance figures (see docs/PERFORMANCE.md).
bench: deps build
	@$(MAKE) --no-print-directory deps SYSDEPS='$(BENCHDEPS)'
	$(GO) test -run '^$$' -bench . -benchtime 1x $(BENCHFLAGS) ./... 2>&1 | tee bench.out

## demo: the main job: a 3-node cluster in network namespaces (see README).
demo: deps build
	./build/demo.sh

demo-clean:
	./build/demo.sh clean

fmt:
	gofmt -l -w .

vet:
	$(GO) vet ./...

clean:
	rm -rf $(BIN)
