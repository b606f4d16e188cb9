# Pinned tool versions: change them here and run `make contracts`.
GETH_VERSION := v1.17.10
ABIGEN := go run github.com/ethereum/go-ethereum/cmd/abigen@$(GETH_VERSION)
# staticcheck, pinned: a newer release may add checks (run `make lint` after
# changing it).
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT ?= go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
CONTRACTS := TestToken BurnWithDigest BatchBurner EventImpostor

.PHONY: all build test test-short soak fuzz bench bench-1m bench-seen bench-sparse bench-sparse-anvil bench-idle bench-micro bench-pg-instructions bench-quick bench-real bench-groups bench-cost bench-still bench-multigroup bench-upgrade contracts demo lint compose-check clean

# Each fuzz target runs a fixed number of inputs, 10-30 s each on a 2-core
# machine, not for a wall-clock -fuzztime: a duration races Go's fuzzing
# coordinator at its deadline, which then fails the target with a bare
# "context deadline exceeded" and no crasher (golang/go#75804, fixed after
# Go 1.26). FUZZTIME=30s or FUZZTIME=1000000x sets every target's budget.
# A crash leaves its input in the package's testdata/fuzz, to be committed as
# a regression seed.
FUZZTIME ?=

all: build

build:
	go build -buildvcs=true -o bin/poller ./cmd/poller
	go build -o bin/devchain ./cmd/devchain
	go build -o bin/webhook-receiver ./cmd/webhook-receiver

# The whole suite: unit, real-Postgres store tests and the integration tests
# that run the real binaries against a real go-ethereum node.
test:
	go test -race -count=1 -timeout 30m ./...

test-short:
	go test -short -count=1 ./...

# The chaos suite as a soak (see RELIABILITY.md): faults for SOAK.
SOAK ?= 30m
soak:
	go test -race -count=1 -timeout 6h -run 'TestChaos$$' ./integration -args -soak $(SOAK)

# Benchmarks (see BENCHMARKS.md): the ceilings, catch-up with 1 and 3
# replicas, failover, the steady state, idle RPC calls and the sparse first
# sync, against the local Postgres (about 15 minutes).
bench:
	go run ./cmd/bench -burns 100000 -sparse-runs 3 -out bench.json

bench-1m:
	go run ./cmd/bench -burns 1000000 -steady 0 -seen 0 -idle 0 -sparse=false -out bench-1m.json

bench-seen:
	go run ./cmd/bench -seen-only -seen 30s -out bench-seen.json

# The sparse first sync: go-ethereum's simulated backend seeded with 300,000
# blocks and 3,000 burns, a proxy adding 80 ms per request and capping
# eth_getLogs at 10,000 blocks with Alchemy's reply, one replica, three
# timed runs per setting on the one seeded chain (about 6 minutes).
bench-sparse:
	go run ./cmd/bench -sparse-only -sparse-node sim -sparse-blocks 300000 -sparse-burns 3000 -sparse-runs 3 -out bench-sparse.json

# The same on anvil (npm), smaller: anvil mines about 100-170 empty blocks/s here.
ANVIL ?= node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil
bench-sparse-anvil: $(ANVIL)
	go run ./cmd/bench -sparse-only -sparse-node anvil -anvil $(ANVIL) -sparse-blocks 30000 -sparse-burns 300 -out bench-sparse-anvil.json

$(ANVIL):
	npm install --no-save --no-package-lock @foundry-rs/anvil-linux-amd64@1.7.1

# Real nodes, each its own process: geth --dev built from the module proxy at
# GETH_VERSION (once, into bin/tools), anvil from npm, and Ponder (npm, its
# project written and installed into PONDER on first use; PONDER= skips it).
GETH ?= bin/tools/geth-$(GETH_VERSION)/geth
PONDER ?= bin/ponder
$(GETH):
	GOBIN=$(abspath $(dir $(GETH))) go install github.com/ethereum/go-ethereum/cmd/geth@$(GETH_VERSION)

# The regression guard: geth --dev, 30,000 burns (400 a block), the ceilings
# read without burnpoller, one replica with the defaults and with
# VERIFY_RECEIPTS=false, Ponder; prints the ratios (under a minute once geth
# and Ponder are installed). Run it before and after any change to the read
# or write path.
bench-quick: $(GETH)
	go run ./cmd/bench -dense-node geth -geth $(GETH) -burns 30000 -ponder "$(PONDER)" -summary -out bin/bench-quick.json

# The dense run on both real nodes at 100,000 burns, even and uneven blocks, with Ponder (about 8 minutes).
bench-real: $(GETH) $(ANVIL)
	go run ./cmd/bench -dense-node geth,anvil -shape even,uneven -geth $(GETH) -anvil $(ANVIL) -burns 100000 -ponder "$(PONDER)" -summary -out bin/bench-real.json

# Many groups on one database (issue 17): 1, 2, 4 and 8 burn contracts on one
# geth, a poller process each, through a proxy adding 80 ms per request and
# straight to the node; each group against its time alone (about 4 minutes).
bench-groups: $(GETH)
	go run ./cmd/bench -groups-only -geth $(GETH) -summary -out bin/bench-groups.json

# What following a chain costs at the provider, caught up: anvil sealing
# every 2 s and every 12 s and geth --dev every 2 s, a trickle of burns;
# burnpoller with 1 and 3 replicas at the defaults, with RPC_WS_URL and with
# one setting changed at a time, and Ponder, all on the same chain at once,
# each through its own proxy counting every JSON-RPC call by method (a
# batch's members one each), HTTP requests and bytes; compute units from
# Alchemy's public table (about 15 minutes).
bench-cost: $(GETH) $(ANVIL)
	go run ./cmd/bench -cost-only -geth $(GETH) -anvil $(ANVIL) -ponder "$(PONDER)" -summary -out bin/bench-cost.json

# A head standing still (issue 38): one replica at the defaults follows the
# dev chain through a proxy that holds the head after a burn's block while
# the node finalizes past it, every JSON-RPC call counted by method: an
# hour's calls and compute units with the cursor below the still head and
# at it (about 8 minutes).
bench-still:
	go run ./cmd/bench -still-only -summary -out bin/bench-still.json

# Many chains, one deployment (issue 31): four groups on geth and anvil (two
# burn contracts on each, a proxy adding 20 ms per request in front of each
# group): one 3-replica deployment serving them all (GROUPS) against four
# 2-replica deployments (connections, memory), each replica's share of the
# groups over time (one killed, then back), and one group's node hung for
# 60 s against undisturbed runs (about 20 minutes).
bench-multigroup: $(GETH) $(ANVIL)
	go run ./cmd/bench -multigroup-only -geth $(GETH) -anvil $(ANVIL) -multigroup-runs 3 -out bin/bench-multigroup.json

# An upgrade on a ledger of real size (issue 39): a million payments, each
# with its confirmed event and a delivered webhook, at the previous
# release's schema (built from this repository's history); two replicas of
# that release record a burn every 100 ms on anvil while this tree's expand
# steps run, then two of this tree's while its contract step runs; each
# step's time and the longest a writer waited for a table lock (about 3
# minutes).
bench-upgrade: $(ANVIL)
	go run ./cmd/bench -upgrade-only -anvil $(ANVIL) -out bin/bench-upgrade.json

# RPC calls while idle: 1 and 3 replicas, with and without RPC_WS_URL.
bench-idle:
	go run ./cmd/bench -idle-only -idle 60s -out bench-idle.json

# The writer's Postgres work against COPY, in instructions (valgrind):
# repeatable on a loaded machine, where timings are not (about 3 minutes).
bench-pg-instructions:
	bash scripts/pg-instructions.sh

bench-micro:
	go test -run '^$$' -bench . -benchtime 3s ./chain ./payments ./webhooks

fuzz:
	go test -run '^$$' -fuzz '^FuzzDecodeBurn$$' -fuzztime $(or $(FUZZTIME),300000x) ./chain
	go test -run '^$$' -fuzz '^FuzzParseRangeLimit$$' -fuzztime $(or $(FUZZTIME),250000x) ./chain
	go test -run '^$$' -fuzz '^FuzzClassifyReply$$' -fuzztime $(or $(FUZZTIME),150000x) ./chain
	go test -run '^$$' -fuzz '^FuzzRPCLogDecodesAsTypesLog$$' -fuzztime $(or $(FUZZTIME),250000x) ./chain
	go test -run '^$$' -fuzz '^FuzzFastDecodeIsUnmarshal$$' -fuzztime $(or $(FUZZTIME),250000x) ./chain
	go test -run '^$$' -fuzz '^FuzzReplyErrorIsUnmarshal$$' -fuzztime $(or $(FUZZTIME),100000x) ./chain
	go test -run '^$$' -fuzz '^FuzzBoundedDataIsTheMapsFirstFields$$' -fuzztime $(or $(FUZZTIME),150000x) ./chain
	go test -run '^$$' -fuzz '^FuzzConfig$$' -fuzztime $(or $(FUZZTIME),20000x) ./config
	go test -run '^$$' -fuzz '^FuzzRedact$$' -fuzztime $(or $(FUZZTIME),150000x) ./database
	go test -run '^$$' -fuzz '^FuzzRedactURL$$' -fuzztime $(or $(FUZZTIME),150000x) ./chain

# Recompiles contracts/src with the solc pinned in contracts/package.json and
# regenerates the committed ABI, bytecode and Go bindings.
contracts:
	cd contracts && npm ci --no-audit --no-fund && node compile.js
	mkdir -p contracts/bindings
	@for c in $(CONTRACTS); do \
		pkgfile=$$(echo $$c | tr 'A-Z' 'a-z'); \
		$(ABIGEN) --abi contracts/build/$$c.abi --bin contracts/build/$$c.bin \
			--pkg bindings --type $$c --out contracts/bindings/$$pkgfile.go || exit 1; \
	done

# gofmt, go vet and golangci-lint with the checked-in .golangci.yml
# (staticcheck, errcheck, gosec, gocognit, errorlint, ...; generated files
# such as contracts/bindings are skipped).
lint:
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-ed:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	$(GOLANGCI_LINT) run ./...

compose-check:
	docker-compose config -q

demo: build
	./scripts/demo.sh

clean:
	rm -rf bin
