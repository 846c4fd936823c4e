# LLM gateway: an nginx dynamic module.
#
#   make              build build/ngx_http_llm_gateway_module.so against Debian's nginx-dev
#   make NGINX_SRC=/path/to/nginx-1.x.y   build against another nginx source tree
#   make unit         build and run the pure-C++ unit tests (GoogleTest)
#   make test         unit tests, then the integration suite (prove -r t/); the tests run per
#                     file and in total are printed, and under CI=true a skipped test fails
#   make run          start stock nginx with the module on conf/example.conf (foreground)
#   make bench        gateway vs plain nginx proxy_pass, side by side
#   make bench-instructions  instructions per request (callgrind), check vs reserve mode
#   make screenshots  the dashboard's pictures in docs/img/dashboard/ (its browser test)
#   make deps         install missing Debian packages (apt-get), saying what it installs
#   make fuzz [FUZZ_SECONDS=60] [FUZZ_TARGETS="store users"]  libFuzzer targets of the core's parsers (clang)
#   make deb          the Debian package libnginx-mod-http-llm-gateway in build/deb/ (docs/install.md)
#   make soak         SOAK_SECONDS (600) of mixed traffic with faults, sanitizers on (docs/testing.md#soak)

SHELL       := /bin/bash
NGINX_SRC   ?= /usr/share/nginx/src
NGINX_BIN   ?= /usr/sbin/nginx
BUILD       ?= build
MODULE      := $(BUILD)/ngx_http_llm_gateway_module.so
NGX_BUILD   := $(BUILD)/nginx
CXX         ?= g++
CXXFLAGS    ?= -std=c++17 -O2 -g -Wall -Wextra -Werror -Wshadow -fPIC
PROVE_JOBS  ?= 2
NGX_CC_OPT  ?= -O2 -fstack-protector-strong
NGX_LD_OPT  ?=

CORE_SRCS   := $(sort $(shell find src/core -name '*.cpp'))
CORE_HDRS   := $(shell find src/core -name '*.h' -o -name '*.def')
NGX_SRCS    := $(sort $(shell find src/ngx -name '*.cpp'))
NGX_HDRS    := $(shell find src/ngx -name '*.h')
UNIT_SRCS   := $(sort $(wildcard t/unit/*.cpp))
UNIT_HDRS   := $(wildcard t/unit/*.h)
# The dashboard's files, built into the module (src/core/admin/ui_assets.cpp).
UI_FILES    := $(sort $(wildcard src/admin-ui/*))
UI_DEF      := -DLLMGW_UI_DIR='"$(CURDIR)/src/admin-ui"'
UI_OBJ      := objs/addon/admin/ui_assets.o

# Debian's configure flags for its stock nginx (--with-compat et al.), so the
# module's signature matches /usr/sbin/nginx.
CONF_FLAGS_FILE := $(NGINX_SRC)/conf_flags

.PHONY: all module unit ui-unit screenshots test integration run bench bench-mcp bench-instructions deps clean js conformance-deps test-asan fuzz fuzz-build fuzz-targets deb soak

all: module

deps:
	@scripts/install-deps

# configure lists the sources when it runs: rerun it when files come or go.
SRC_LIST := $(CORE_SRCS) $(NGX_SRCS)
$(shell mkdir -p $(BUILD); echo '$(SRC_LIST)' | cmp -s - $(BUILD)/sources.list || echo '$(SRC_LIST)' > $(BUILD)/sources.list)

# The configured tree is stood for by objs/Makefile, which configure writes
# (Debian's nginx-dev tree has no top-level Makefile to write). After it, the
# module's objects depend on the headers each one includes (gcc -MMD, listed in
# objs/addon/*/*.d), so a second make does nothing and a changed file rebuilds
# only the objects that include it.
NGX_MAKEFILE := $(NGX_BUILD)/objs/Makefile
$(NGX_MAKEFILE): config $(wildcard $(CONF_FLAGS_FILE)) $(BUILD)/sources.list
	@rm -rf $(NGX_BUILD) && mkdir -p $(NGX_BUILD)
	@cp -a $(NGINX_SRC)/. $(NGX_BUILD)/
	@cd $(NGX_BUILD) && if [ -f conf_flags ]; then . ./conf_flags; else NGX_CONF_FLAGS=(--with-compat --with-http_ssl_module); fi; \
	  CONFIGURE=./configure; [ -x ./configure ] || CONFIGURE=auto/configure; \
	  $$CONFIGURE "$${NGX_CONF_FLAGS[@]}" --with-cc-opt="$(NGX_CC_OPT)" --with-ld-opt="$(NGX_LD_OPT)" \
	     --add-dynamic-module=$(CURDIR) > configure.log 2>&1 || { tail -30 configure.log; exit 1; }
	@printf '\n-include $$(wildcard objs/addon/*/*.d)\n' >> $@

$(MODULE): $(NGX_MAKEFILE) $(CORE_SRCS) $(CORE_HDRS) $(NGX_SRCS) $(NGX_HDRS) $(UI_FILES)
	@# nginx's Makefile does not know the files .incbin reads: a changed one rebuilds their object
	@o=$(NGX_BUILD)/$(UI_OBJ); if [ -f $$o ] && [ -n "$$(find $(UI_FILES) -newer $$o)" ]; then rm -f $$o; fi
	$(MAKE) -C $(NGX_BUILD) -f objs/Makefile -j$$(nproc) modules
	@# a new file, not an overwrite: a running nginx keeps its mapping of the old one
	cp $(NGX_BUILD)/objs/ngx_http_llm_gateway_module.so $@.tmp && mv -f $@.tmp $@

module: $(MODULE)

# The module as a Debian package, as Debian packs its own nginx modules
# (scripts/make-deb), in $(BUILD)/deb/ or LLMGW_DEB_DIR.
deb: module
	@LLMGW_MODULE=$(abspath $(MODULE)) LLMGW_DEB_DIR=$(abspath $(or $(LLMGW_DEB_DIR),$(BUILD)/deb)) scripts/make-deb

# ---- unit tests: the pure core, no nginx ----
UNIT_BIN  := $(BUILD)/unit_tests
UNIT_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(CORE_SRCS) $(UNIT_SRCS))

# Each object depends on the headers it includes (-MMD: $(BUILD)/obj/**/*.d).
$(BUILD)/obj/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -MMD -MP $(UI_DEF) -Isrc -c -o $@ $<

-include $(UNIT_OBJS:.o=.d)

$(BUILD)/obj/src/core/admin/ui_assets.o: $(UI_FILES)

$(UNIT_BIN): $(UNIT_OBJS)
	$(CXX) $(CXXFLAGS) -o $@ $(UNIT_OBJS) -lgtest -lgtest_main -lpthread -lcrypto -lhiredis

# How many tests each part ran (make test prints them at the end).
COUNTS := $(BUILD)/test-counts

# AdmitScriptRedis.* need a redis-server: t/30-redis-script.t runs them
# against one (they would only skip here). A skipped test fails under CI
# (scripts/test-counts).
UNIT_FILTER ?= -AdmitScriptRedis.*
unit: $(UNIT_BIN)
	@mkdir -p $(COUNTS)
	@set -o pipefail; $(UNIT_BIN) --gtest_filter='$(UNIT_FILTER)' 2>&1 | tee $(BUILD)/unit.log
	@scripts/test-counts unit gtest $(BUILD)/unit.log $(COUNTS)/unit

# The dashboard's formatting, chart-scaling and sorting functions (node's test runner).
ui-unit:
	@mkdir -p $(COUNTS)
	@set -o pipefail; node --test t/ui/ 2>&1 | tee $(BUILD)/ui-unit.log
	@scripts/test-counts ui-unit node $(BUILD)/ui-unit.log $(COUNTS)/ui-unit

js: t/js/node_modules/.installed
t/js/node_modules/.installed: t/js/package.json t/js/package-lock.json
	cd t/js && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The MCP conformance suite and the Node 22 it needs (npm's "node" package).
conformance-deps: t/conformance/node_modules/.installed
t/conformance/node_modules/.installed: t/conformance/package.json t/conformance/package-lock.json
	@echo "installing the MCP conformance suite and Node 22 from npm into t/conformance/node_modules"
	cd t/conformance && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# A failing file is run once more, verbosely, so that its diagnostics end the
# output (a parallel run interleaves them far above the summary); the target
# fails either way. t/lib/GwHarness.pm prints the tests run per file and in
# total, and under CI=true fails the run when a file or a test was skipped.
# t/testrules.yml runs t/99-*.t last, alone: t/99-no-secret-anywhere.t reads
# what every other file left in $(ARTIFACTS) (Gw.pm keeps it there when
# LLMGW_ARTIFACTS is set).
ARTIFACTS := $(BUILD)/test-artifacts
integration: module js conformance-deps
	@mkdir -p $(COUNTS) && rm -rf $(ARTIFACTS) && mkdir -p $(ARTIFACTS)
	@export LLMGW_MODULE=$(CURDIR)/$(MODULE) NGINX_BIN=$(NGINX_BIN) LLMGW_ARTIFACTS=$(CURDIR)/$(ARTIFACTS) \
	  LLMGW_COUNTS_FILE=$(CURDIR)/$(COUNTS)/integration PERL5LIB=$(CURDIR)/t/lib$${PERL5LIB:+:$$PERL5LIB}; \
	if prove --harness=GwHarness -j$(PROVE_JOBS) -r --state=save t/; then exit 0; fi; \
	echo "== the failed files once more, verbosely:"; \
	prove -v --state=failed || true; exit 1

test: deps
	@rm -rf $(COUNTS)
	$(MAKE) --no-print-directory -j$$(nproc) $(UNIT_BIN)
	$(MAKE) --no-print-directory unit
	$(MAKE) --no-print-directory ui-unit
	$(MAKE) --no-print-directory integration
	@echo "== make test ran:"; cat $(COUNTS)/unit $(COUNTS)/ui-unit $(COUNTS)/integration | sed 's/^/   /'

# The integration suite against a module built with AddressSanitizer and
# UndefinedBehaviorSanitizer, loaded into the stock nginx with libasan
# preloaded; any sanitizer report in an error.log fails its test.
ASAN_BUILD := $(BUILD)/asan
# ---- fuzzing: libFuzzer targets of the core's parsers (clang) ----
# make fuzz [FUZZ_SECONDS=60] [FUZZ_TARGETS="store users"]: builds the targets
# and runs each for FUZZ_SECONDS from its seed corpus (fuzz/corpus/<target>/,
# copied to $(BUILD)/fuzz/corpus-<target>/, where the run adds what it finds;
# fuzz/make-seeds writes its gen-* seeds from the test fixtures). The core's sources are
# compiled once, with the fuzzer's coverage instrumentation and the
# sanitizers, into objects shared by every target (an archive: each target
# links what it uses). A crash's input is written to
# $(BUILD)/fuzz/crash-<target>-<hash>; the run stops there and fails.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= multipart mcp request store response config translate paths discovery users metrics admin
FUZZ_CXX ?= clang++
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_FLAGS := -std=c++17 -O1 -g -fno-omit-frame-pointer -Isrc
# UndefinedBehaviorSanitizer's builtin check (clz(0)) included: fuzz/ubsan.supp.
FUZZ_OBJ_SAN := -fsanitize=fuzzer-no-link,address,undefined
FUZZ_BIN_SAN := -fsanitize=fuzzer,address,undefined
# The objects are rebuilt when the compiler or these flags change.
FUZZ_STAMP := $(FUZZ_DIR)/flags
$(shell mkdir -p $(FUZZ_DIR); echo '$(FUZZ_CXX) $(FUZZ_FLAGS) $(FUZZ_OBJ_SAN) $(FUZZ_BIN_SAN)' | cmp -s - $(FUZZ_STAMP) || echo '$(FUZZ_CXX) $(FUZZ_FLAGS) $(FUZZ_OBJ_SAN) $(FUZZ_BIN_SAN)' > $(FUZZ_STAMP))
FUZZ_CORE_SRCS := $(filter-out src/core/admin/ui_assets.cpp,$(CORE_SRCS))
FUZZ_OBJS := $(patsubst %.cpp,$(FUZZ_DIR)/obj/%.o,$(FUZZ_CORE_SRCS))
FUZZ_LIB := $(FUZZ_DIR)/libcore.a
FUZZ_BINS := $(patsubst %,$(FUZZ_DIR)/fuzz_%,$(FUZZ_TARGETS))
# Inputs longer than this are not tried (JSON bodies get more room).
FUZZ_MAX_LEN ?= 4096
FUZZ_MAX_LEN_translate ?= 16384
FUZZ_MAX_LEN_users ?= 8192
FUZZ_MAX_LEN_discovery ?= 16384

$(FUZZ_DIR)/obj/%.o: %.cpp $(FUZZ_STAMP)
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_FLAGS) $(FUZZ_OBJ_SAN) -MMD -MP -c -o $@ $<

-include $(FUZZ_OBJS:.o=.d)

$(FUZZ_LIB): $(FUZZ_OBJS)
	@rm -f $@
	@echo "ar $@ ($(words $(FUZZ_OBJS)) objects)"; ar rcs $@ $(FUZZ_OBJS)

$(FUZZ_DIR)/fuzz_%: fuzz/fuzz_%.cpp $(FUZZ_LIB) $(FUZZ_STAMP) $(wildcard fuzz/*.h)
	$(FUZZ_CXX) $(FUZZ_FLAGS) $(FUZZ_BIN_SAN) -MMD -MP -o $@ $< $(FUZZ_LIB) -lcrypto -lhiredis

-include $(FUZZ_BINS:=.d)

fuzz-build: $(FUZZ_BINS)

fuzz-targets:
	@echo $(FUZZ_TARGETS)

fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_DIR)/corpus-$$t && cp -n fuzz/corpus/$$t/* $(FUZZ_DIR)/corpus-$$t/ 2>/dev/null; \
	  maxlen=$(FUZZ_MAX_LEN); case $$t in translate) maxlen=$(FUZZ_MAX_LEN_translate);; \
	    users) maxlen=$(FUZZ_MAX_LEN_users);; discovery) maxlen=$(FUZZ_MAX_LEN_discovery);; esac; \
	  log=$(FUZZ_DIR)/log-$$t.txt; \
	  if UBSAN_OPTIONS=suppressions=$(CURDIR)/fuzz/ubsan.supp:halt_on_error=1:print_stacktrace=1 \
	    $(FUZZ_DIR)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=$$maxlen \
	      -artifact_prefix=$(FUZZ_DIR)/crash-$$t- -print_final_stats=1 $(FUZZ_DIR)/corpus-$$t >$$log 2>&1; then \
	    echo "fuzz_$$t: $(FUZZ_SECONDS) s, $$(sed -n 's/^stat::number_of_executed_units: *//p' $$log) runs," \
	      "$$(sed -n 's/^stat::average_exec_per_sec: *//p' $$log) exec/s, nothing found"; \
	  else \
	    tail -n 80 $$log; echo "fuzz_$$t FAILED (the whole output: $$log)"; exit 1; \
	  fi; \
	done

# t/03-deb.t is left out: the package holds the release build.
test-asan: js conformance-deps
	$(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) module \
	  NGX_CC_OPT="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined" \
	  NGX_LD_OPT="-fsanitize=address,undefined"
	@rm -rf $(ASAN_BUILD)/test-artifacts && mkdir -p $(ASAN_BUILD)/test-artifacts
	LLMGW_MODULE=$(CURDIR)/$(ASAN_BUILD)/ngx_http_llm_gateway_module.so NGINX_BIN=$(NGINX_BIN) \
	  LLMGW_NGINX_PRELOAD="$$($(CXX) -print-file-name=libasan.so) $$($(CXX) -print-file-name=libubsan.so)" \
	  ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:log_path=stderr \
	  UBSAN_OPTIONS=print_stacktrace=1 \
	  LLMGW_ARTIFACTS=$(CURDIR)/$(ASAN_BUILD)/test-artifacts PERL5LIB=$(CURDIR)/t/lib$${PERL5LIB:+:$$PERL5LIB} \
	  prove --harness=GwHarness -j$(PROVE_JOBS) $$(ls t/*.t | grep -v '^t/03-deb\.t$$')

# The soak (t/soak/soak.pl): SOAK_SECONDS (default 600) of mixed traffic with
# store outages, reloads and client cancels against the sanitizer build;
# memory sampled every 10 s (docs/testing.md#soak).
SOAK_SECONDS ?= 600
soak:
	$(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) module \
	  NGX_CC_OPT="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined" \
	  NGX_LD_OPT="-fsanitize=address,undefined"
	SOAK_SECONDS=$(SOAK_SECONDS) LLMGW_MODULE=$(CURDIR)/$(ASAN_BUILD)/ngx_http_llm_gateway_module.so NGINX_BIN=$(NGINX_BIN) \
	  LLMGW_NGINX_PRELOAD="$$($(CXX) -print-file-name=libasan.so) $$($(CXX) -print-file-name=libubsan.so)" \
	  ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:log_path=stderr:quarantine_size_mb=32 \
	  UBSAN_OPTIONS=print_stacktrace=1 \
	  prove -v t/soak/soak.pl

run: deps module js
	@scripts/run-example

# The dashboard's screenshots in docs/img/dashboard/, taken by its browser test.
screenshots: module js
	@mkdir -p docs/img/dashboard
	LLMGW_DASHBOARD_SHOTS=$(CURDIR)/docs/img/dashboard LLMGW_MODULE=$(CURDIR)/$(MODULE) NGINX_BIN=$(NGINX_BIN) \
	  prove t/75-dashboard.t

bench: deps module
	@bench/run

bench-mcp: deps module
	@bench/mcp-latency

bench-instructions: deps module
	@bench/instructions

clean:
	rm -rf $(BUILD)
