/* SPDX-License-Identifier: BSD-3-Clause */
/* killfail.c - fast fail: the kill-on-fail decision, srun's command line as
 * the plugin can see it in slurm_spank_init, and the later cross-check. */
#include "killfail.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int dpg_kill_on_fail_parse(const char *s, const char *what, bool *out,
			   struct dpg_err *err)
{
	char q[64];

	if (s != NULL && strcmp(s, "yes") == 0) {
		*out = true;
		return 0;
	}
	if (s != NULL && strcmp(s, "no") == 0) {
		*out = false;
		return 0;
	}
	return dpg_errf(err, "invalid %s value '%s': expected yes (end the whole "
			"step when one task fails) or no", what,
			dpg_err_quote(s != NULL ? s : "", q, sizeof(q)));
}

const char *dpg_argv_option(int argc, char *const argv[], const char *name)
{
	size_t n = strlen(name);
	const char *val = NULL;

	for (int i = 1; i < argc && argv[i] != NULL; i++) {
		const char *a = argv[i];

		if (a[0] != '-' || a[1] != '-' || strncmp(a + 2, name, n) != 0)
			continue;
		if (a[2 + n] == '=')
			val = a + 3 + n;
		else if (a[2 + n] == '\0' && i + 1 < argc && argv[i + 1] != NULL)
			val = argv[++i];
	}
	return val;
}

int dpg_cmdline_split(char *buf, size_t len, char **argv, int max, int *argc,
		      struct dpg_err *err)
{
	int n = 0;

	buf[len] = '\0';
	for (size_t i = 0; i < len; i += strlen(buf + i) + 1) {
		if (n >= max)
			return dpg_errf(err, "command line has more than %d words", max);
		argv[n++] = buf + i;
	}
	argv[n] = NULL;
	*argc = n;
	return 0;
}

int dpg_cmdline_read(const char *path, char *buf, size_t size, char **argv,
		     int max, int *argc, struct dpg_err *err)
{
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return dpg_errf(err, "cannot open %s: %s", path, strerror(errno));
	while (got + 1 < size) {
		ssize_t r = read(fd, buf + got, size - 1 - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;

			close(fd);
			return dpg_errf(err, "cannot read %s: %s", path, strerror(e));
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	if (got + 1 >= size)
		return dpg_errf(err, "%s is longer than %zu bytes", path, size - 2);
	return dpg_cmdline_split(buf, got, argv, max, argc, err);
}

int dpg_killfail_decide(const struct dpg_killfail_in *in, enum dpg_killfail *out,
			struct dpg_err *err)
{
	bool on = in->conf;

	if (in->opt != NULL &&
	    dpg_kill_on_fail_parse(in->opt, "--dpg-kill-on-fail", &on, err) != 0)
		return -1;
	if (in->user_set)
		*out = DPG_KF_USER;
	else
		*out = on && in->dpg_step ? DPG_KF_SET : DPG_KF_OFF;
	return 0;
}

int dpg_killfail_check(enum dpg_killfail early, enum dpg_killfail late,
		       struct dpg_err *err)
{
	bool on = early == DPG_KF_SET;

	if (early == late)
		return 0;
	return dpg_errf(err, "kill-on-fail stays %s for this step: srun took it "
			"before reading its options, which ask for %s; write "
			"--dpg-kill-on-fail=yes|no and --dpg-gpus-per-task=N in full "
			"before the program, or pass %s to srun",
			on ? "on" : "off", on ? "off" : "on", on ? "-K0" : "-K1");
}
