# counters: PGXS build for a C++17 PostgreSQL extension.
EXTENSION = counters
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" counters.control)

MODULE_big = counters
SRCS = $(sort $(wildcard src/*.cpp src/*/*.cpp))
OBJS = $(SRCS:.cpp=.o)

# src/sql/counters.sql is the one editable install script; the build copies it to counters--$(EXTVERSION).sql.
# The upgrade scripts (and the first release's install script) beside it are frozen once released.
DATA = $(filter-out src/sql/counters--$(EXTVERSION).sql,$(wildcard src/sql/counters--*.sql)) \
	$(wildcard src/sql/counters--*.control)
DATA_built = src/sql/counters--$(EXTVERSION).sql
# setup runs first: it makes every later test run as counters_app, a role that is not a superuser (sql/setup.sql).
REGRESS = setup $(filter-out setup,$(sort $(basename $(notdir $(wildcard sql/*.sql)))))
REGRESS_OPTS = --inputdir=.
ISOLATION = setup $(filter-out setup,$(sort $(basename $(notdir $(wildcard test/specs/*.spec)))))
ISOLATION_OPTS = --inputdir=test
# TAP tests (PostgreSQL::Test::Cluster): each starts clusters of its own (crashes, preloaded libraries, pgbench loads,
# dump and restore). PGXS runs them with prove after pg_regress and the isolation tests in `make installcheck`; they
# live in test/t, not PGXS's default t/. They cannot run as root (initdb refuses): see test/suites.sh.
# One test: make installcheck REGRESS= ISOLATION= PROVE_TESTS=test/t/001_crash.pl
TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl

EXTRA_CLEAN = results regression.diffs regression.out output_iso test/results log tmp_check

PG_CONFIG ?= pg_config
PG_CPPFLAGS += -I$(srcdir)/src
PG_CXXFLAGS += -std=gnu++17 -fno-exceptions -fno-rtti -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
	-Wno-register -Wno-sign-compare
ifeq ($(WERROR),1)
PG_CXXFLAGS += -Werror
endif

# JIT inlining of our objects buys nothing; skip the LLVM bitcode build.
override with_llvm = no

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# A running server has the installed library mapped: writing it in place (what install(1) does) crashes it. The new
# library is written beside it and renamed over it, so that running servers keep the old file until they restart.
INSTALL_SHLIB = install_aside() { $(INSTALL) -m 755 "$$1" "$$2.new" && mv -f "$$2.new" "$$2"; }; install_aside

$(OBJS): $(wildcard src/*.hpp src/*/*.hpp)

src/sql/counters--$(EXTVERSION).sql: src/sql/counters.sql
	cp $< $@

.PHONY: format
format:
	clang-format -i src/*.cpp src/*.hpp src/*/*.cpp src/*/*.hpp

# A versioned source archive for PGXN (and anyone): counters-<version>.zip from the committed tree (git archive).
DISTVERSION = $(shell sed -n 's/^ *"version": "\([0-9.]*\)",/\1/p' META.json | head -1)
.PHONY: dist
dist:
	git archive --format zip --prefix=counters-$(DISTVERSION)/ -o counters-$(DISTVERSION).zip HEAD
