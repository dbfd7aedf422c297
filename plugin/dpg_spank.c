/* SPDX-License-Identifier: BSD-3-Clause */
/* dpg_spank.c - the SPANK glue: registers the --dpg-* options, reads the
 * plugstack.conf arguments, and moves data between Slurm and lib/.
 *
 * Which process runs what (SPANK loads the plugin into each separately):
 *   callback        srun/salloc/sbatch (local, allocator)   slurmstepd (remote)
 *   init            parse plugstack.conf; an error stops     parse; an error is
 *                   the command; srun: kill-on-fail          reported by the tasks
 *                   (SLURM_KILL_BAD_EXIT, before srun
 *                   reads its options)
 *   init_post_opt   conf defaults; srun: the step's secret,   conf defaults
 *                   kill-on-fail cross-checked (a warning)
 *   user_init       -                                        the node's plan (once)
 *   task_init       -                                        the contract + binding
 *                                                            of one task
 *   exit            -                                        free the plan
 * Logic lives in lib/launch and lib/common; nothing here may block, exit or
 * crash slurmstepd, and a failure never drains the node. */
#include <errno.h>
#include <net/if.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "bindenv.h"
#include "conf.h"
#include "contract.h"
#include "killfail.h"
#include "netif.h"
#include "opts.h"
#include "plan.h"
#include "portcheck.h"
#include "requeue.h"
#include "topo.h"
#include "topocache.h"

/* deadline of the forked check of the admin's topology XML (hwloc can crash on a
 * malformed one: the crash must stay in the child) */
#define DPG_TOPO_PARSE_MS 10000

/* srun's command line as slurm_spank_init reads it (kill-on-fail) */
#define DPG_CMDLINE_BYTES 65536
#define DPG_CMDLINE_WORDS 4096

SPANK_PLUGIN(dpg, 1);

/* Per-process state: SPANK loads the plugin into each srun, sbatch,
 * salloc and slurmstepd process separately. */
static struct {
	struct dpg_conf conf;
	bool conf_ok;
	char conf_error[DPG_ERR_MSG_MAX];
	struct dpg_request req;
	struct dpg_env env;	/* scratch for one task (too big for a stack) */
	/* remote only: the node's binding plan, made once in user_init */
	struct dpg_plan *plan;
	const char *topo_how;		/* "live", "cached", "xml" */
	double plan_ms;			/* topology + plan, in user_init */
	bool plan_failed;
	char plan_error[DPG_ERR_MSG_MAX];
	char ifname[IF_NAMESIZE];	/* interface carrying MASTER_ADDR */
	/* Slurm's step-level GPU view, before it binds single tasks */
	char step_gpus[DPG_ENV_VALUE_MAX], step_cvd[DPG_ENV_VALUE_MAX],
	     step_rvd[DPG_ENV_VALUE_MAX];
	/* srun only: kill-on-fail as decided in init, and as the parsed
	 * options ask for (--dpg-kill-on-fail: "yes", "no" or NULL) */
	enum dpg_killfail kf_early;
	bool kf_known, kf_user_set;
	const char *kill_opt;
	char cmdline[DPG_CMDLINE_BYTES];
	char *cmd_argv[DPG_CMDLINE_WORDS + 1];
} st;

static int opt_gpus(int val, const char *optarg, int remote);
static int opt_verbose(int val, const char *optarg, int remote);
static int opt_port(int val, const char *optarg, int remote);
static int opt_bind(int val, const char *optarg, int remote);
static void bind_task(uint32_t id);
static int opt_visibility(int val, const char *optarg, int remote);
static int opt_kill(int val, const char *optarg, int remote);
static bool active(void);
static int opt_requeue(int val, const char *optarg, int remote);

static struct spank_option options[] = {
	{ "dpg-gpus-per-task", "N",
	  "[dpg] Export the rank contract (RANK, WORLD_SIZE, MASTER_ADDR, ...) "
	  "to every task; N GPUs per task (0 = CPU-only)", 1, 0, opt_gpus },
	{ "dpg-verbose", NULL,
	  "[dpg] Each task prints one line with what dpg gave it", 0, 0,
	  opt_verbose },
	{ "dpg-port", "P",
	  "[dpg] Use port P (1024-65535) as MASTER_PORT for this step", 1, 0,
	  opt_port },
	{ "dpg-bind", "closest|none",
	  "[dpg] Bind each task to the CPUs nearest its GPU (closest) or not "
	  "(none)", 1, 0, opt_bind },
	{ "dpg-gpu-visibility", "isolate|ordered",
	  "[dpg] A task sees only its GPUs (isolate) or all the step's GPUs "
	  "with its own at index LOCAL_RANK (ordered)", 1, 0, opt_visibility },
	{ "dpg-kill-on-fail", "yes|no",
	  "[dpg] End the whole step within seconds when one task exits "
	  "abnormally (yes, the default) or let the others run on (no)", 1, 0,
	  opt_kill },
	{ "dpg-requeue", "GRACE",
	  "[dpg] Warn the tasks (SIGUSR1) GRACE seconds before the time limit; "
	  "libdpg programs then save and exit 75 for a requeue", 1, 0,
	  opt_requeue },
	SPANK_OPTIONS_TABLE_END
};

/* Option callbacks run several times per process (environment first, then
 * the command line; twice in slurmstepd): each one just sets the value, so
 * the last one wins and a repeat is harmless. */
static int opt_gpus(int val, const char *optarg, int remote)
{
	struct dpg_err err;
	int n;

	(void)val;
	(void)remote;
	if (dpg_opt_gpus_per_task(optarg, &n, &err) != 0) {
		slurm_error("dpg: %s", err.msg);
		return -1;
	}
	st.req.gpus_per_task = n;
	return 0;
}

static int opt_verbose(int val, const char *optarg, int remote)
{
	(void)val;
	(void)optarg;
	(void)remote;
	st.req.verbose = true;
	return 0;
}

static int opt_port(int val, const char *optarg, int remote)
{
	struct dpg_err err;
	uint16_t p;

	(void)val;
	(void)remote;
	if (dpg_opt_port(optarg, &p, &err) != 0) {
		slurm_error("dpg: %s", err.msg);
		return -1;
	}
	st.req.port = p;
	return 0;
}

static int opt_bind(int val, const char *optarg, int remote)
{
	struct dpg_err err;
	enum dpg_bind b;

	(void)val;
	(void)remote;
	if (dpg_bind_parse(optarg, &b, &err) != 0) {
		slurm_error("dpg: invalid --dpg-bind value: %s", err.msg);
		return -1;
	}
	st.req.bind = (int)b;
	return 0;
}

static int opt_visibility(int val, const char *optarg, int remote)
{
	struct dpg_err err;
	enum dpg_gpu_visibility v;

	(void)val;
	(void)remote;
	if (dpg_gpu_visibility_parse(optarg, &v, &err) != 0) {
		slurm_error("dpg: invalid --dpg-gpu-visibility value: %s", err.msg);
		return -1;
	}
	st.req.visibility = (int)v;
	return 0;
}

static int opt_kill(int val, const char *optarg, int remote)
{
	struct dpg_err err;
	bool on;

	(void)val;
	(void)remote;
	if (dpg_kill_on_fail_parse(optarg, "--dpg-kill-on-fail", &on, &err) != 0) {
		slurm_error("dpg: %s", err.msg);
		return -1;
	}
	st.kill_opt = on ? "yes" : "no";
	return 0;
}

/* srun, in init: SPANK option callbacks run only after srun has read
 * SLURM_KILL_BAD_EXIT (Slurm 22.05: spank_init, then _opt_env, then
 * getopt), so the user's --dpg-kill-on-fail is read here from srun's own
 * command line (or its SLURM_SPANK_* form) and checked again in
 * init_post_opt.  srun's -K / -K0 on the command line still win. */
static void killfail_early(void)
{
	struct dpg_killfail_in in = { .conf = st.conf.kill_on_fail };
	const char *opt, *gpus;
	struct dpg_err err;
	int argc = 0;

	if (dpg_cmdline_read("/proc/self/cmdline", st.cmdline, sizeof(st.cmdline),
			     st.cmd_argv, DPG_CMDLINE_WORDS, &argc, &err) != 0) {
		slurm_error("dpg: kill-on-fail not set (srun -K does it): %s", err.msg);
		return;
	}
	opt = dpg_argv_option(argc, st.cmd_argv, "dpg-kill-on-fail");
	gpus = dpg_argv_option(argc, st.cmd_argv, "dpg-gpus-per-task");
	in.opt = opt != NULL ? opt : getenv(DPG_KILL_ON_FAIL_ENV);
	in.dpg_step = st.conf.default_gpus_per_task >= 0 || gpus != NULL ||
		      getenv(DPG_GPUS_PER_TASK_ENV) != NULL;
	in.user_set = getenv(DPG_KILL_BAD_EXIT_VAR) != NULL;
	if (dpg_killfail_decide(&in, &st.kf_early, &err) != 0)
		return;	/* the option's callback rejects the value */
	if (st.kf_early == DPG_KF_SET &&
	    setenv(DPG_KILL_BAD_EXIT_VAR, "1", 0) != 0) {
		slurm_error("dpg: kill-on-fail not set: setenv: %s", strerror(errno));
		return;
	}
	st.kf_user_set = in.user_set;
	st.kf_known = true;
}

/* srun, in init_post_opt: srun has read SLURM_KILL_BAD_EXIT; if the parsed
 * options ask for something else (an abbreviated option), say so: srun's
 * decision cannot change any more, and an "optional" plugin's error here
 * does not stop srun.  The variable is then dropped so that the tasks (and
 * sruns inside them) do not inherit it. */
static void killfail_check(void)
{
	struct dpg_killfail_in in = {
		.conf = st.conf.kill_on_fail, .opt = st.kill_opt,
		.dpg_step = active(), .user_set = st.kf_user_set,
	};
	enum dpg_killfail late;
	struct dpg_err err;

	if (!st.kf_known)
		return;
	if (st.kf_early == DPG_KF_SET)
		unsetenv(DPG_KILL_BAD_EXIT_VAR);
	if (dpg_killfail_decide(&in, &late, &err) != 0 ||
	    dpg_killfail_check(st.kf_early, late, &err) != 0)
		slurm_error("dpg: %s", err.msg);
}

/* sbatch/salloc/srun read SBATCH_SIGNAL / SALLOC_SIGNAL / SLURM_SIGNAL
 * (Slurm 22.05: src/sbatch/opt.c _opt_env) before the command line's option
 * callbacks run, but after a script's #SBATCH lines: set it now, from the
 * command line or the admin's default, or from the callback of an #SBATCH
 * line; a --signal of the user's own (set earlier or later) wins. */
static void set_warning_signal(int grace)
{
	const char *prog = program_invocation_short_name;
	const char *var = strcmp(prog, "sbatch") == 0 ? "SBATCH_SIGNAL" :
			  strcmp(prog, "salloc") == 0 ? "SALLOC_SIGNAL" :
			  strcmp(prog, "srun") == 0 && !getenv("SLURM_JOB_ID") ?
			  "SLURM_SIGNAL" : NULL;
	char v[32];

	if (grace <= 0 || var == NULL || getenv(var) != NULL ||
	    dpg_requeue_signal(grace, v, sizeof(v)) != 0)
		return;
	if (setenv(var, v, 1) != 0)
		slurm_error("dpg: --dpg-requeue: cannot set %s: %s", var,
			    strerror(errno));
}

static int opt_requeue(int val, const char *optarg, int remote)
{
	struct dpg_err err;
	int g;

	(void)val;
	(void)remote;
	if (dpg_requeue_parse("--dpg-requeue", optarg, &g, &err) != 0) {
		slurm_error("dpg: %s", err.msg);
		return -1;
	}
	st.req.requeue = g;
	if (spank_context() == S_CTX_ALLOCATOR)
		set_warning_signal(g);
	return 0;
}

/* srun/sbatch/salloc: the warning signal before any option is read. */
static int requeue_early(void)
{
	char buf[32768];
	struct dpg_err err;
	FILE *f = fopen("/proc/self/cmdline", "re");
	size_t n = 0;
	int g = st.conf.requeue, rc = 0;

	if (f != NULL) {
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		rc = dpg_requeue_from_cmdline(buf, n, &g, &err);
	}
	if (rc < 0) {
		slurm_error("dpg: %s", err.msg);
		return -1;
	}
	set_warning_signal(g);
	return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	spank_context_t ctx = spank_context();
	struct dpg_err err;

	dpg_request_init(&st.req);
	st.conf_ok = dpg_conf_parse(&st.conf, ac, av, &err) == 0;
	if (!st.conf_ok) {
		snprintf(st.conf_error, sizeof(st.conf_error), "%s", err.msg);
		slurm_error("dpg: plugstack.conf: %s", err.msg);
		/* srun/sbatch/salloc stop here, before any job exists; a
		 * daemon must not fail init (that drains nodes): the step's
		 * tasks report the error instead. */
		if (ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR)
			return -1;
	}
	if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR && ctx != S_CTX_REMOTE)
		return 0;
	if (ctx == S_CTX_LOCAL)
		killfail_early();
	for (struct spank_option *o = options; o->name != NULL; o++) {
		spank_err_t rc = spank_option_register(sp, o);

		if (rc != ESPANK_SUCCESS) {
			slurm_error("dpg: cannot register --%s: %s", o->name,
				    spank_strerror(rc));
			return ctx == S_CTX_REMOTE ? 0 : -1;
		}
	}
	if (ctx != S_CTX_REMOTE && st.conf_ok)
		return requeue_early();
	return 0;
}

static bool active(void)
{
	return st.req.gpus_per_task >= 0 || st.conf.default_gpus_per_task >= 0;
}

/* srun, once per step: a fresh random secret in the step's environment.
 * Only processes of the job's user (and root) can read a task's
 * environment, so the rendezvous store can refuse everyone else.  It
 * travels as SLURM_DPG_SECRET because srun --export=NONE still carries
 * SLURM_* variables; task_init renames it to DPG_SECRET. */
static int make_secret(void)
{
	unsigned char raw[DPG_SECRET_BYTES];
	char hex[DPG_SECRET_HEX_LEN + 1];
	size_t got = 0;

	while (got < sizeof(raw)) {
		ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {	/* never a weaker secret: no secret, no step */
			slurm_error("dpg: cannot generate the job secret: getrandom: %s",
				    n < 0 ? strerror(errno) : "no bytes returned");
			return -1;
		}
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	if (setenv(DPG_VAR_SECRET_TRANSIT, hex, 1) != 0) {
		slurm_error("dpg: cannot set DPG_SECRET: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	if (st.req.gpus_per_task < 0 && st.conf.default_gpus_per_task >= 0)
		st.req.gpus_per_task = st.conf.default_gpus_per_task;
	if (st.req.bind < 0)
		st.req.bind = (int)st.conf.bind;
	if (st.req.visibility < 0)
		st.req.visibility = (int)st.conf.visibility;
	if (st.req.requeue < 0)
		st.req.requeue = st.conf.requeue;
	if (spank_context() == S_CTX_LOCAL && !active() &&
	    (st.req.verbose || st.req.port != 0))
		slurm_error("dpg: --dpg-verbose and --dpg-port have no effect "
			    "without --dpg-gpus-per-task=N");
	if (spank_context() == S_CTX_LOCAL)
		killfail_check();
	if (spank_context() == S_CTX_LOCAL && active())
		return make_secret();
	return 0;
}

/* DPG_REQUEUE=GRACE: dpg_init installs its stop-signal handlers.  Until
 * then the task holds Slurm's warning (SIGUSR1 blocked, inherited through
 * exec): one that comes during start-up stays pending instead of killing
 * the task, and dpg_init lets it through.  It is also ignored (inherited
 * too): a shell in between that unblocks every signal for the commands it
 * runs (dash, Debian's /bin/sh) then drops the warning rather than dying of
 * it.  Linux never discards a blocked signal as ignored, so a pending one
 * still reaches the handler dpg_init installs. */
static int export_requeue(spank_t sp)
{
	struct sigaction ign;
	sigset_t set;
	char v[16];

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
		slurm_error("dpg: --dpg-requeue: cannot hold SIGUSR1 until "
			    "dpg_init: %s", strerror(errno));
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	sigemptyset(&ign.sa_mask);
	if (sigaction(SIGUSR1, &ign, NULL) != 0)
		slurm_error("dpg: --dpg-requeue: cannot ignore SIGUSR1 until "
			    "dpg_init: %s", strerror(errno));

	snprintf(v, sizeof(v), "%d", st.req.requeue);
	if (spank_setenv(sp, "DPG_REQUEUE", v, 1) != ESPANK_SUCCESS) {
		slurm_error("dpg: cannot set DPG_REQUEUE");
		return -1;
	}
	return 0;
}

/* Lookup in the task's environment array (valid until the next setenv). */
static const char *task_getenv(void *ctx, const char *name)
{
	char **env = ctx;
	size_t n = strlen(name);

	for (; env != NULL && *env != NULL; env++)
		if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
			return *env + n + 1;
	return NULL;
}

/* Rank 0 checks that nothing listens on MASTER_PORT yet: a collision then
 * becomes a clear message instead of a rendezvous timeout.  Asked the way
 * the store's listener binds (portcheck.c), so a port left in TIME_WAIT by
 * the previous step is not reported. */
static void check_port_free(const struct dpg_step *s, const struct dpg_task *t)
{
	struct dpg_err err;

	if (dpg_port_check_free(s->master_port, &err) == -DPG_ERR_ENV)
		slurm_error("dpg: MASTER_PORT %u is already in use on %s; rank 0 "
			    "will fail to listen: pass --dpg-port=P with a free "
			    "port", (unsigned)s->master_port, t->node);
}

/* --dpg-verbose: libdpg prints its startup line (DPG_VERBOSE, unless the
 * user set it) with this node's planning time and topology source. */
static void export_startup(spank_t sp)
{
	char v[64];

	if (spank_getenv(sp, DPG_VAR_VERBOSE, v, sizeof(v)) == ESPANK_ENV_NOEXIST)
		(void)spank_setenv(sp, DPG_VAR_VERBOSE, "1", 1);
	if (st.topo_how == NULL)
		return;
	snprintf(v, sizeof(v), "%.3f %s", st.plan_ms, st.topo_how);
	(void)spank_setenv(sp, DPG_VAR_STARTUP_PLAN, v, 1);
}

static int export_contract(spank_t sp)
{
	struct dpg_step step;
	struct dpg_task task;
	struct dpg_err err;
	char **env = NULL;
	char line[DPG_ERR_MSG_MAX];
	const char *secret;
	char hexsecret[DPG_SECRET_HEX_LEN + 1];
	static const char *const stale[] = { DPG_TORCHELASTIC_STALE };

	if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || env == NULL) {
		slurm_error("dpg: cannot read the task environment; no rank "
			    "variables exported");
		return -1;
	}
	bool amd = st.plan != NULL && st.plan->ngpus > 0 &&
		   st.plan->gpus[0].vendor == DPG_GPU_AMD;
	const char *sv = amd ? st.step_rvd : st.step_cvd;
	struct dpg_bind_req breq = {
		.visibility = (enum dpg_gpu_visibility)st.req.visibility,
		.socket_ifname = st.ifname[0] != '\0' ? st.ifname : NULL,
		.step_gpus = st.step_gpus[0] != '\0' ? st.step_gpus : NULL,
		.step_visible = sv[0] != '\0' ? sv : NULL,
	};

	if (st.plan_failed) {
		slurm_error("dpg: no variables exported: %s", st.plan_error);
		return -1;
	}
	if (dpg_step_from_env(task_getenv, env, &st.conf, &st.req, &step, &err) != 0 ||
	    dpg_task_from_env(task_getenv, env, &step, &task, &err) != 0 ||
	    dpg_contract_build(&step, &task, &st.req, task_getenv, env, &st.env,
			       &err) != 0 ||
	    (st.plan != NULL && dpg_bind_env(st.plan, task.local_rank, &breq,
					     task_getenv, env, &st.env, &err) != 0)) {
		slurm_error("dpg: no rank variables exported: %s", err.msg);
		return -1;
	}
	secret = task_getenv(env, DPG_VAR_SECRET_TRANSIT);
	if (secret == NULL || strlen(secret) != DPG_SECRET_HEX_LEN) {
		slurm_error("dpg: no job secret from srun (was srun started without "
			    "the dpg plugin?); no rank variables exported");
		return -1;
	}
	snprintf(hexsecret, sizeof(hexsecret), "%s", secret);
	spank_unsetenv(sp, DPG_VAR_SECRET_TRANSIT);
	if (spank_setenv(sp, DPG_VAR_SECRET, hexsecret, 1) != ESPANK_SUCCESS) {
		slurm_error("dpg: cannot set DPG_SECRET");
		return -1;
	}
	for (size_t i = 0; i < sizeof(stale) / sizeof(stale[0]); i++)
		if (task_getenv(env, stale[i]) != NULL)
			spank_unsetenv(sp, stale[i]);
	for (size_t i = 0; i < st.env.n; i++) {
		spank_err_t rc = spank_setenv(sp, st.env.v[i].name,
					      st.env.v[i].value, 1);

		if (rc != ESPANK_SUCCESS) {
			slurm_error("dpg: cannot set %s: %s", st.env.v[i].name,
				    spank_strerror(rc));
			return -1;
		}
	}
	if (st.req.requeue > 0 && export_requeue(sp) != 0)
		return -1;
	bind_task(task.local_rank);
	if (st.req.verbose)
		export_startup(sp);
	if (task.rank == 0 && st.env.notice[0] != '\0')
		slurm_info("%s", st.env.notice);
	if (task.rank == 0)
		check_port_free(&step, &task);
	if (st.req.verbose &&
	    dpg_contract_describe(&step, &task, &st.req, line, sizeof(line)) == 0) {
		char row[DPG_ERR_MSG_MAX] = "";

		if (st.plan != NULL)
			dpg_plan_format_task(st.plan, task.local_rank, row, sizeof(row));
		fprintf(stderr, "%s%s%s\n", line, row[0] ? " | " : "", row);
		fflush(stderr);
	}
	return 0;
}

/* Slurm's step cores (abstract core ids, hwloc logical order) as PUs. */
static void step_cpus(spank_t sp, const struct dpg_topo *topo, bool live,
		      char *buf, size_t len)
{
	struct dpg_cpuset set, cores_set, affinity;
	char *cores = NULL;
	struct dpg_err err;
	int used = 0;

	buf[0] = '\0';
	dpg_cpuset_zero(&set);
	if (spank_get_item(sp, S_STEP_ALLOC_CORES, &cores) == ESPANK_SUCCESS &&
	    cores != NULL && dpg_cpuset_parse(cores, &cores_set, &err) == 0) {
		for (int c = dpg_cpuset_next(&cores_set, 0); c >= 0;
		     c = dpg_cpuset_next(&cores_set, (unsigned)c + 1)) {
			const struct dpg_core *k;

			if ((uint32_t)c >= topo->ncores)
				continue;
			k = &topo->cores[c];
			for (uint32_t i = 0; i < k->npus; i++)
				dpg_cpuset_set(&set, topo->pus[k->pu_first + i]);
			used = 1;
		}
	}
	if (!used)
		dpg_cpuset_fill(&set);
	/* a live topology must also respect where this step may run */
	if (live && dpg_cpuset_from_affinity(&affinity, &err) == 0)
		dpg_cpuset_and(&set, &set, &affinity);
	dpg_cpuset_and(&set, &set, &topo->complete);
	if (dpg_cpuset_empty(&set) || dpg_cpuset_format(&set, buf, len, &err) != 0)
		buf[0] = '\0';
}

/* Keep a step-level variable for task_init ("" = unset or too long). */
static void copy_env(char **env, const char *name, char *buf, size_t len)
{
	const char *v = task_getenv(env, name);

	buf[0] = '\0';
	if (v != NULL && strlen(v) < len)
		snprintf(buf, len, "%s", v);
}

static void plan_fail(const char *what, const struct dpg_err *why)
{
	struct dpg_err e = *why;

	st.plan_failed = true;
	dpg_err_prefix(&e, what);
	memcpy(st.plan_error, e.msg, sizeof(st.plan_error));
}

/* The node's topology: the admin's XML, else the node's cache (saved by the
 * first step after a boot; only root writes it), else live discovery. */
static int load_topology(struct dpg_topo **topo, struct dpg_err *err)
{
	struct dpg_topo_cache_cfg cc = {
		.dir = st.conf.topology_cache, .owner = 0, .may_write = geteuid() == 0,
		.root = NULL, .timeout_ms = DPG_TOPO_PARSE_MS,
	};
	char note[DPG_ERR_MSG_MAX + 64];
	bool hit = false;

	if (st.conf.topology_xml[0] != '\0') {
		st.topo_how = "xml";
		return dpg_topo_load_xml_isolated(st.conf.topology_xml, DPG_TOPO_PARSE_MS,
						  topo, err);
	}
	if (dpg_topo_load_cached(&cc, topo, &hit, note, sizeof(note), err) != 0)
		return -1;
	if (note[0] != '\0')
		slurm_info("dpg: %s", note);
	st.topo_how = hit ? "cached" : "live";
	return 0;
}

static double mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Once per node and step: load the node's topology and plan every local
 * task's GPUs, NICs and CPUs. */
int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	struct dpg_plan_req preq = { 0 };
	struct dpg_topo *topo = NULL;
	struct dpg_step step;
	struct dpg_err err;
	uint32_t stepid = 0, ntasks = 0;
	char **env = NULL;
	static char cpus[DPG_CPUSET_STR_MAX];
	const char *gpus;
	bool live = st.conf.topology_xml[0] == '\0';
	double t0 = mono_ms();

	(void)ac;
	(void)av;
	if (!spank_remote(sp) || !active() || !st.conf_ok ||
	    spank_get_item(sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS ||
	    dpg_is_special_step(stepid))
		return 0;
	if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &ntasks) != ESPANK_SUCCESS ||
	    ntasks == 0 || spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS) {
		dpg_errf(&err, "cannot read the step's local task count");
		plan_fail("binding", &err);
		return 0;
	}
	if (load_topology(&topo, &err) != 0) {
		plan_fail("topology", &err);
		return 0;
	}
	step_cpus(sp, topo, live, cpus, sizeof(cpus));
	gpus = task_getenv(env, "SLURM_STEP_GPUS");
	copy_env(env, "SLURM_STEP_GPUS", st.step_gpus, sizeof(st.step_gpus));
	copy_env(env, "CUDA_VISIBLE_DEVICES", st.step_cvd, sizeof(st.step_cvd));
	copy_env(env, "ROCR_VISIBLE_DEVICES", st.step_rvd, sizeof(st.step_rvd));
	preq.ntasks = ntasks;
	preq.gpus_per_task = (uint32_t)(st.req.gpus_per_task < 0 ? 0 : st.req.gpus_per_task);
	preq.gpus = gpus != NULL && *gpus != '\0' ? gpus : NULL;
	preq.cpus = cpus[0] != '\0' ? cpus : NULL;
	preq.policy.bind = (enum dpg_bind)st.req.bind;
	preq.policy.allow_gpu_sharing = st.conf.gpu_sharing;
	if (dpg_plan_make(topo, &preq, &st.plan, &err) != 0)
		plan_fail("binding", &err);
	dpg_topo_free(topo);
	st.plan_ms = mono_ms() - t0;
	if (dpg_step_from_env(task_getenv, env, &st.conf, &st.req, &step, &err) == 0)
		(void)dpg_route_ifname(step.master_addr, st.ifname, sizeof(st.ifname),
				       NULL);	/* best effort: "" on failure */
	return 0;
}

/* Bind the task (this process, just before exec) to its planned CPUs.
 * This runs in task_init, not task_init_privileged: only there are the
 * task's SLURM_* variables final, so a task that gets no contract is never
 * bound; narrowing one's own affinity needs no privilege, Slurm's
 * task/affinity has already run, and cgroup limits apply either way. */
static void bind_task(uint32_t id)
{
	const struct dpg_plan_task *t;
	struct dpg_err err;
	unsigned n = 0;

	if (st.plan == NULL || st.req.bind != DPG_BIND_CLOSEST || id >= st.plan->ntasks)
		return;
	t = &st.plan->tasks[id];
	if (dpg_cpuset_to_affinity(&t->cpuset, &n, &err) != 0)
		slurm_error("dpg: task %u: cannot bind to CPUs %s: %s", id, t->cpus,
			    err.msg);
	else if (n == 0)
		slurm_error("dpg: task %u: none of its CPUs %s is available here; "
			    "not bound (does topology_xml= describe this node?)",
			    id, t->cpus);
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	dpg_plan_free(st.plan);
	st.plan = NULL;
	return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	uint32_t stepid = 0;

	(void)ac;
	(void)av;
	if (!spank_remote(sp) || !active())
		return 0;
	if (spank_get_item(sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS ||
	    dpg_is_special_step(stepid))
		return 0;
	if (!st.conf_ok) {
		slurm_error("dpg: no rank variables exported: plugstack.conf: %s "
			    "(ask your administrator)", st.conf_error);
		return -1;
	}
	return export_contract(sp);
}
