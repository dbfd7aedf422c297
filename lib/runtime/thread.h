/* SPDX-License-Identifier: BSD-3-Clause */
/* thread.h - libdpg's own threads start with every signal blocked, so that
 * a signal for the process (SIGUSR1, SIGTERM) reaches the program's threads. */
#ifndef DPG_LIB_THREAD_H
#define DPG_LIB_THREAD_H

#include <pthread.h>

/* pthread_create(th, NULL, fn, arg) with the new thread's signal mask full
 * (the caller's is unchanged).  Returns 0 or pthread_create's error number. */
int dpg_thread_start(pthread_t *th, void *(*fn)(void *), void *arg);

#endif
