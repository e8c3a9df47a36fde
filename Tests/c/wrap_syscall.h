/*
 * wrap_syscall.h - for tests linked with -Wl,--wrap=syscall: their __wrap_syscall reads
 * the call's six arguments with WRAP_SYSCALL_ARGS(n, a) (long a[6]).
 */
#ifndef LANEPOOL_TEST_WRAP_SYSCALL_H
#define LANEPOOL_TEST_WRAP_SYSCALL_H
#include <stdarg.h>

#define WRAP_SYSCALL_ARGS(n, a)                                                                    \
  long a[6];                                                                                       \
  do {                                                                                             \
    va_list ap_;                                                                                   \
    va_start(ap_, n);                                                                              \
    for (int i_ = 0; i_ < 6; i_++) a[i_] = va_arg(ap_, long);                                      \
    va_end(ap_);                                                                                   \
  } while (0)

#endif
