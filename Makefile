# Joiner. `make demo` runs the embedded default; `make test` runs every test
# that can run on this machine (unit + integration against real components).
SHELL   := /bin/bash
GO      ?= go
BIN     := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# Tests of real processes need time on 2 cores; keep the whole run well under 30 min.
TEST_TIMEOUT ?= 20m
TEST_FLAGS   ?=

export JOINER_TOOLS_BIN := $(BIN)

.PHONY: all build test unit lint bench demo perf generate deps tools clean
.PHONY: package bench-karpenter image

# Package version: a vX.Y.Z tag without its "v", else
# 0.0.0+git<commit> (deb and rpm versions must start with a digit, no "-").
PKG_ARCH    ?= amd64
PKG_VERSION ?= $(shell v='$(VERSION)'; case "$$v" in (v[0-9]*.*) echo "$${v#v}" | tr '-' '+';; (*) echo "0.0.0+git$(COMMIT)";; esac)

all: build

build: ## the joiner binary in bin/
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/joiner ./cmd/joiner

deps: ## Debian packages the tests need (installed when missing, as root)
	@bash scripts/install-deps.sh

tools: ## test control plane and other pinned tools, built from the module proxy into bin/
	@bash scripts/build-tools.sh

test: deps tools ## unit + integration tests
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./...

unit: ## fast tests only: no real processes, no root
	$(GO) test -short -count=1 ./...

lint: ## gofmt check + go vet
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^tools/')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

bench: ## benchmarks (see BENCHMARKS.md for the commands behind each table)
	$(GO) test -run '^$$' -bench . -benchmem ./...

bench-karpenter: ## Karpenter v1.14's scheduling benchmark (module proxy) beside Joiner's, on the same pods (BENCHMARKS.md)
	@bash scripts/bench-karpenter.sh

generate: ## deepcopy + CRDs from api/ (controller-gen pinned in tools/controller-gen)
	@bash scripts/build-tools.sh controller-gen
	$(BIN)/controller-gen object paths=./api/...
	$(BIN)/controller-gen crd paths="./api/core/v1;./api/aws/v1" output:crd:artifacts:config=packaging/crds
	$(GO) run ./packaging/crds/crdpatch packaging/crds
	@bash scripts/sync-chart-crds.sh

package: ## dist/*.deb and dist/*.rpm (nfpm pinned in tools/nfpm) for PKG_ARCH (default amd64)
	@bash scripts/build-tools.sh nfpm
	@bash scripts/sync-chart-crds.sh
	rm -f dist/joiner dist/*.deb dist/*.rpm
	CGO_ENABLED=0 GOOS=linux GOARCH=$(PKG_ARCH) $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o dist/joiner ./cmd/joiner
	JOINER_VERSION=$(PKG_VERSION) JOINER_ARCH=$(PKG_ARCH) $(BIN)/nfpm package -f packaging/nfpm/nfpm.yaml -p deb -t dist/
	JOINER_VERSION=$(PKG_VERSION) JOINER_ARCH=$(PKG_ARCH) $(BIN)/nfpm package -f packaging/nfpm/nfpm.yaml -p rpm -t dist/

# Image timestamps: SOURCE_DATE_EPOCH, else the last commit's time (a rebuild of
# the same commit gives the same digest).
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

image: ## multi-arch OCI image layout in dist/image (linux/amd64, linux/arm64), no Docker: static, non-root, SBOM, reproducible digest
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./packaging/image/mkimage --out dist/image --version $(VERSION) --commit $(COMMIT)

demo: deps tools build ## the embedded default: control plane, joiner sim, 3 coordinators, agents; provision, interrupt, consolidate
	$(GO) build -o $(BIN)/joiner-demo ./test/cmd/joiner-demo
	$(BIN)/joiner-demo --joiner $(BIN)/joiner $(DEMO_FLAGS)

perf: deps tools build ## the end-to-end performance suite (test/perf): Karpenter's perf workloads on the harness; not part of `make test`
	$(GO) build -o $(BIN)/joiner-perf ./test/cmd/joiner-perf
	$(BIN)/joiner-perf --joiner $(BIN)/joiner $(PERF_FLAGS)

clean:
	rm -rf $(BIN)
