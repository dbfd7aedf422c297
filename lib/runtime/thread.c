/* SPDX-License-Identifier: BSD-3-Clause */
/* thread.c - the library's threads start with every signal blocked (see
 * thread.h): a requeue warning must land in the thread that asks for it. */
#include "thread.h"

#include <signal.h>

int dpg_thread_start(pthread_t *th, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int rc, mrc;

	sigfillset(&all);
	/* the new thread inherits the mask in force at pthread_create */
	if ((mrc = pthread_sigmask(SIG_SETMASK, &all, &old)) != 0)
		return mrc;
	rc = pthread_create(th, NULL, fn, arg);
	mrc = pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc != 0 ? rc : mrc;
}
