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

.PHONY: all build test unit lint bench demo generate deps tools fuzz clean

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

generate: ## deepcopy + CRDs from api/ (controller-gen pinned in tools/controller-gen)
	@bash scripts/build-tools.sh controller-gen
	$(BIN)/controller-gen object paths=./api/...
	$(BIN)/controller-gen crd paths="./api/core/v1;./api/aws/v1" output:crd:artifacts:config=packaging/crds
	$(GO) run ./packaging/crds/crdpatch packaging/crds

demo: build ## the embedded default: a simulated region, a control plane, coordinators
	@echo "make demo: not implemented yet (issue: Packaging + demo)"; exit 1

clean:
	rm -rf $(BIN)
