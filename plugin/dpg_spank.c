/* dpg_spank.c - the SPANK glue: registers the --dpg-* options, reads the
 * plugstack.conf arguments, and moves data between Slurm and lib/. */
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "conf.h"
#include "contract.h"
#include "opts.h"

SPANK_PLUGIN(dpg, 1);

/* Per-process state: SPANK loads the plugin into each srun, sbatch,
 * salloc and slurmstepd process separately. */
static struct {
	struct dpg_conf conf;
	bool conf_ok;
	char conf_error[DPG_ERR_MSG_MAX];
	struct dpg_request req;
	struct dpg_env env;	/* scratch for one task (too big for a stack) */
} st;

static int opt_gpus(int val, const char *optarg, int remote);
static int opt_verbose(int val, const char *optarg, int remote);
static int opt_port(int val, const char *optarg, int remote);

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
	for (struct spank_option *o = options; o->name != NULL; o++) {
		spank_err_t rc = spank_option_register(sp, o);

		if (rc != ESPANK_SUCCESS) {
			slurm_error("dpg: cannot register --%s: %s", o->name,
				    spank_strerror(rc));
			return ctx == S_CTX_REMOTE ? 0 : -1;
		}
	}
	return 0;
}

static bool active(void)
{
	return st.req.gpus_per_task >= 0 || st.conf.default_gpus_per_task >= 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	if (st.req.gpus_per_task < 0 && st.conf.default_gpus_per_task >= 0)
		st.req.gpus_per_task = st.conf.default_gpus_per_task;
	if (spank_context() == S_CTX_LOCAL && !active() &&
	    (st.req.verbose || st.req.port != 0))
		slurm_error("dpg: --dpg-verbose and --dpg-port have no effect "
			    "without --dpg-gpus-per-task=N");
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
 * becomes a clear message instead of a rendezvous timeout. */
static void check_port_free(const struct dpg_step *s, const struct dpg_task *t)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	a.sin_port = htons(s->master_port);
	a.sin_addr.s_addr = htonl(INADDR_ANY);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 && errno == EADDRINUSE)
		slurm_error("dpg: MASTER_PORT %u is already in use on %s; rank 0 "
			    "will fail to listen: pass --dpg-port=P with a free "
			    "port", (unsigned)s->master_port, t->node);
	close(fd);
}

static int export_contract(spank_t sp)
{
	struct dpg_step step;
	struct dpg_task task;
	struct dpg_err err;
	char **env = NULL;
	char line[DPG_ERR_MSG_MAX];

	if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || env == NULL) {
		slurm_error("dpg: cannot read the task environment; no rank "
			    "variables exported");
		return -1;
	}
	if (dpg_step_from_env(task_getenv, env, &st.conf, &st.req, &step, &err) != 0 ||
	    dpg_task_from_env(task_getenv, env, &step, &task, &err) != 0 ||
	    dpg_contract_build(&step, &task, &st.req, task_getenv, env, &st.env,
			       &err) != 0) {
		slurm_error("dpg: no rank variables exported: %s", err.msg);
		return -1;
	}
	/* torch: "True" makes every rank a client of a store nobody serves */
	if (task_getenv(env, "TORCHELASTIC_USE_AGENT_STORE") != NULL)
		spank_unsetenv(sp, "TORCHELASTIC_USE_AGENT_STORE");
	for (size_t i = 0; i < st.env.n; i++) {
		spank_err_t rc = spank_setenv(sp, st.env.v[i].name,
					      st.env.v[i].value, 1);

		if (rc != ESPANK_SUCCESS) {
			slurm_error("dpg: cannot set %s: %s", st.env.v[i].name,
				    spank_strerror(rc));
			return -1;
		}
	}
	if (task.rank == 0 && st.env.notice[0] != '\0')
		slurm_info("%s", st.env.notice);
	if (task.rank == 0)
		check_port_free(&step, &task);
	if (st.req.verbose &&
	    dpg_contract_describe(&step, &task, &st.req, line, sizeof(line)) == 0) {
		fprintf(stderr, "%s\n", line);
		fflush(stderr);
	}
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
