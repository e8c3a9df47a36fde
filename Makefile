# Makefile - LanePool's C library without SwiftPM (GNU make; docs/c-library.md).
#
#   make [-j2] [NUMA=1]             static and shared liblanepool under $(BUILDDIR)
#   make install PREFIX=/usr/local  lib/, include/lanepool.h, lib/pkgconfig/lanepool.pc
#                [DESTDIR=/stage]   (DESTDIR is prepended to every path, not written in
#                                   lanepool.pc)
#   make uninstall PREFIX=...       removes what install put there
#   make clean                      removes $(BUILDDIR) (this build's outputs only)
#   make check-install              scripts/c-install-test: install into a temporary
#                                   prefix, build and run a C and a C++ client
#
# The version comes from include/lanepool.h (LANEPOOL_VERSION_MAJOR/MINOR/PATCH), the
# one source of truth. Only the functions the header marks LANEPOOL_API are exported.

HEADER := include/lanepool.h
SRCDIR := Sources/CLanePool

version_part = $(shell sed -n 's/^[#]define LANEPOOL_VERSION_$(1) \([0-9][0-9]*\)$$/\1/p' $(HEADER))
MAJOR := $(call version_part,MAJOR)
MINOR := $(call version_part,MINOR)
PATCH := $(call version_part,PATCH)
ifeq ($(and $(MAJOR),$(MINOR),$(PATCH)),)
$(error cannot read LANEPOOL_VERSION_MAJOR/MINOR/PATCH from $(HEADER))
endif
VERSION := $(MAJOR).$(MINOR).$(PATCH)

# Soname: while the major version is 0 every minor release may change the ABI, so
# the soname carries MAJOR.MINOR (liblanepool.so.0.4); from 1.0 on, MAJOR alone.
ifeq ($(MAJOR),0)
SOVERSION := $(MAJOR).$(MINOR)
else
SOVERSION := $(MAJOR)
endif
LINKNAME := liblanepool.so
SONAME := $(LINKNAME).$(SOVERSION)
REALNAME := $(LINKNAME).$(VERSION)
STATIC := liblanepool.a

NUMA ?= 0
ifeq ($(NUMA),1)
BUILDDIR ?= .build-c/lib-numa
NUMA_CPPFLAGS := -DLANEPOOL_HAVE_NUMA
NUMA_LIBS := -lnuma
else
BUILDDIR ?= .build-c/lib
NUMA_CPPFLAGS :=
NUMA_LIBS :=
endif
OBJDIR := $(BUILDDIR)/obj

PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig

CC ?= cc
AR ?= ar
# CFLAGS may be overridden; the flags in LP_CFLAGS are always used. -fexceptions: a C++
# exception thrown by an inline sync's function unwinds through the library's cleanup
# handler (pthread_cleanup_push), which gives the lane back; without it the lane would
# stay lent forever (docs/c-library.md, "C++ exceptions").
CFLAGS ?= -O2 -Wall -Wextra
LP_CFLAGS := -std=c11 -fPIC -fvisibility=hidden -fexceptions -pthread -I$(dir $(HEADER)) \
             $(NUMA_CPPFLAGS)
LP_LDFLAGS := -shared -Wl,-soname,$(SONAME) -Wl,-z,defs -pthread

SRCS := $(sort $(wildcard $(SRCDIR)/*.c))
OBJS := $(patsubst $(SRCDIR)/%.c,$(OBJDIR)/%.o,$(SRCS))

.PHONY: all install uninstall clean check-install version
.DELETE_ON_ERROR:

all: $(BUILDDIR)/$(STATIC) $(BUILDDIR)/$(REALNAME) $(BUILDDIR)/$(SONAME) \
     $(BUILDDIR)/$(LINKNAME)

$(OBJDIR)/%.o: $(SRCDIR)/%.c Makefile | $(OBJDIR)
	$(CC) $(CPPFLAGS) -O2 $(CFLAGS) $(LP_CFLAGS) -MMD -MP -c $< -o $@

$(OBJDIR):
	mkdir -p $@

$(BUILDDIR)/$(STATIC): $(OBJS)
	rm -f $@
	$(AR) rcs $@ $^

$(BUILDDIR)/$(REALNAME): $(OBJS)
	$(CC) $(CFLAGS) $(LDFLAGS) $(LP_LDFLAGS) -o $@ $^ $(NUMA_LIBS)

$(BUILDDIR)/$(SONAME): $(BUILDDIR)/$(REALNAME)
	ln -sf $(REALNAME) $@

$(BUILDDIR)/$(LINKNAME): $(BUILDDIR)/$(SONAME)
	ln -sf $(SONAME) $@

# Written at install time, so it names the PREFIX being installed to. -pthread (and
# -lnuma) are Libs.private: a shared client needs neither, a static one needs both.
# -lnuma rather than Requires.private: numa, since not every libnuma ships numa.pc.
$(BUILDDIR)/lanepool.pc: FORCE | $(OBJDIR)
	@printf '%s\n' \
	  'prefix=$(PREFIX)' \
	  'libdir=$(LIBDIR)' \
	  'includedir=$(INCLUDEDIR)' \
	  '' \
	  'Name: lanepool' \
	  'Description: QoS-aware thread pool for Linux: lanes of pthreads, one FIFO ring each' \
	  'Version: $(VERSION)' \
	  'Libs: -L$${libdir} -llanepool' \
	  'Libs.private: -pthread $(NUMA_LIBS)' \
	  'Cflags: -I$${includedir}' > $@

.PHONY: FORCE
FORCE:

install: all $(BUILDDIR)/lanepool.pc
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 644 $(BUILDDIR)/$(STATIC) $(DESTDIR)$(LIBDIR)/$(STATIC)
	install -m 755 $(BUILDDIR)/$(REALNAME) $(DESTDIR)$(LIBDIR)/$(REALNAME)
	ln -sf $(REALNAME) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/$(LINKNAME)
	install -m 644 $(HEADER) $(DESTDIR)$(INCLUDEDIR)/lanepool.h
	install -m 644 $(BUILDDIR)/lanepool.pc $(DESTDIR)$(PKGCONFIGDIR)/lanepool.pc

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(STATIC) $(DESTDIR)$(LIBDIR)/$(REALNAME) \
	  $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/$(LINKNAME) \
	  $(DESTDIR)$(INCLUDEDIR)/lanepool.h $(DESTDIR)$(PKGCONFIGDIR)/lanepool.pc

clean:
	rm -rf $(BUILDDIR)

check-install:
	bash scripts/c-install-test

version:
	@echo $(VERSION)

-include $(OBJS:.o=.d)
