/*
 * pyxis_standin.c: a STAND-IN for NVIDIA's pyxis SPANK plugin, for Shepherd's dev Slurm cluster only.
 *
 * Launch scripts written for clusters with pyxis (NeMo RL's ray.sub passes --container-image,
 * --container-mounts, --container-workdir, --container-name and --no-container-mount-home to every srun) fail
 * on a Slurm without pyxis: srun rejects the unknown options. This plugin makes srun, sbatch and salloc accept
 * every option pyxis defines, so such scripts run UNMODIFIED on the dev cluster.
 *
 * IT PROVIDES NO CONTAINER. The step runs ON THE HOST:
 *   - no image is pulled, imported or unpacked: --container-image is only recorded;
 *   - nothing is isolated: the task sees the host's filesystem, PATH, users, processes and network;
 *   - --container-mounts are NOT applied (host paths are visible as they are, nothing else is);
 *   - --container-name keeps nothing between steps, --container-save saves nothing;
 *   - --container-remap-root, --container-env, --container-entrypoint[-log], --container-writable/readonly
 *     and --[no-]container-mount-home change nothing.
 *
 * What it does:
 *   - checks the arguments the way pyxis does (an empty --container-image/--container-mounts, a malformed mount
 *     or container name, two different images, both --container-mount-home and --no-container-mount-home ...
 *     are errors), so a script that pyxis would reject fails here too;
 *   - in each task, chdir()s to --container-workdir when given (the task fails if that path does not exist on
 *     the host: with pyxis it would be looked up inside the image);
 *   - exports what the step asked for into the task's environment, for tests to check:
 *       SHEPHERD_PYXIS_STANDIN=1 (any container option given), SHEPHERD_PYXIS_IMAGE, SHEPHERD_PYXIS_MOUNTS
 *       (entries joined with ','), SHEPHERD_PYXIS_WORKDIR, SHEPHERD_PYXIS_NAME, SHEPHERD_PYXIS_NAME_FLAGS,
 *       SHEPHERD_PYXIS_SAVE, SHEPHERD_PYXIS_ENV, and 0/1 for SHEPHERD_PYXIS_MOUNT_HOME, _REMAP_ROOT,
 *       _ENTRYPOINT, _ENTRYPOINT_LOG, _WRITABLE when the flag was given.
 *     Variables for options the step did not give are removed, so a step does not inherit the values of the
 *     step (or batch script) that launched it.
 *
 * Not supported: pyxis's PYXIS_CONTAINER_* environment variables and its plugstack.conf arguments.
 *
 * Built by scripts/dev-cluster against Debian's libslurm-dev (spank.h) and registered in the cluster's
 * etc/plugstack.conf. Written for Shepherd; no pyxis code is used.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(pyxis_standin, 1);

#define ENV_PREFIX "SHEPHERD_PYXIS_"

enum opt_id {
	OPT_IMAGE = 1,
	OPT_MOUNTS,
	OPT_WORKDIR,
	OPT_NAME,
	OPT_SAVE,
	OPT_MOUNT_HOME,
	OPT_NO_MOUNT_HOME,
	OPT_REMAP_ROOT,
	OPT_NO_REMAP_ROOT,
	OPT_ENTRYPOINT,
	OPT_NO_ENTRYPOINT,
	OPT_ENTRYPOINT_LOG,
	OPT_WRITABLE,
	OPT_READONLY,
	OPT_ENV,
};

/* A tri-state flag: -1 not given, else 0/1. */
struct flag {
	const char *env;     /* suffix of the exported variable */
	const char *on_opt;  /* option names, for error messages */
	const char *off_opt; /* NULL: the flag has no negative form */
	int value;
};

static struct {
	char *image;
	char *mounts; /* validated entries joined with ',' (duplicates dropped) */
	char *workdir;
	char *name;
	char *name_flags;
	char *save;
	char *env; /* variable names joined with ',' (duplicates dropped) */
	struct flag mount_home, remap_root, entrypoint, entrypoint_log, writable;
} args = {
	.mount_home = { "MOUNT_HOME", "--container-mount-home", "--no-container-mount-home", -1 },
	.remap_root = { "REMAP_ROOT", "--container-remap-root", "--no-container-remap-root", -1 },
	.entrypoint = { "ENTRYPOINT", "--container-entrypoint", "--no-container-entrypoint", -1 },
	.entrypoint_log = { "ENTRYPOINT_LOG", "--container-entrypoint-log", NULL, -1 },
	.writable = { "WRITABLE", "--container-writable", "--container-readonly", -1 },
};

static int opt_cb(int val, const char *optarg, int remote);

static struct spank_option options[] = {
	{ "container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH",
	  "[pyxis stand-in] image name, recorded only: NO container is used, the step runs on the host",
	  1, OPT_IMAGE, opt_cb },
	{ "container-mounts", "SRC:DST[:FLAGS][,SRC:DST...]",
	  "[pyxis stand-in] bind mounts, checked and recorded but NOT applied", 1, OPT_MOUNTS, opt_cb },
	{ "container-workdir", "PATH", "[pyxis stand-in] the task starts in PATH (on the host)", 1, OPT_WORKDIR,
	  opt_cb },
	{ "container-name", "NAME[:FLAGS]", "[pyxis stand-in] recorded only: nothing is kept between steps", 1,
	  OPT_NAME, opt_cb },
	{ "container-save", "PATH", "[pyxis stand-in] recorded only: nothing is saved", 1, OPT_SAVE, opt_cb },
	{ "container-mount-home", NULL, "[pyxis stand-in] recorded only", 0, OPT_MOUNT_HOME, opt_cb },
	{ "no-container-mount-home", NULL, "[pyxis stand-in] recorded only", 0, OPT_NO_MOUNT_HOME, opt_cb },
	{ "container-remap-root", NULL, "[pyxis stand-in] recorded only", 0, OPT_REMAP_ROOT, opt_cb },
	{ "no-container-remap-root", NULL, "[pyxis stand-in] recorded only", 0, OPT_NO_REMAP_ROOT, opt_cb },
	{ "container-entrypoint", NULL, "[pyxis stand-in] recorded only", 0, OPT_ENTRYPOINT, opt_cb },
	{ "no-container-entrypoint", NULL, "[pyxis stand-in] recorded only", 0, OPT_NO_ENTRYPOINT, opt_cb },
	{ "container-entrypoint-log", NULL, "[pyxis stand-in] recorded only", 0, OPT_ENTRYPOINT_LOG, opt_cb },
	{ "container-writable", NULL, "[pyxis stand-in] recorded only", 0, OPT_WRITABLE, opt_cb },
	{ "container-readonly", NULL, "[pyxis stand-in] recorded only", 0, OPT_READONLY, opt_cb },
	{ "container-env", "NAME[,NAME...]", "[pyxis stand-in] recorded only", 1, OPT_ENV, opt_cb },
	SPANK_OPTIONS_TABLE_END
};

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	slurm_error("pyxis stand-in: %s", msg);
	return -1;
}

static int empty(const char *s)
{
	return s == NULL || *s == '\0';
}

/* A single-valued option: a repeat with the same value is fine (Slurm may call back twice), another is not. */
static int set_single(char **slot, const char *opt, const char *value)
{
	if (empty(value))
		return fail("%s: argument required", opt);
	if (*slot != NULL)
		return strcmp(*slot, value) == 0 ? 0 : fail("%s specified multiple times", opt);
	*slot = strdup(value);
	return *slot ? 0 : fail("out of memory");
}

static int set_flag(struct flag *f, int value)
{
	if (f->value != -1 && f->value != value && f->off_opt != NULL)
		return fail("both %s and %s were specified", f->on_opt, f->off_opt);
	f->value = value;
	return 0;
}

/* Appends `item` to the ','-joined list in *list unless it is already there. */
static int list_add(char **list, const char *item)
{
	size_t n = strlen(item);
	const char *p = *list;
	char *grown;

	while (p != NULL && *p != '\0') {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len == n && strncmp(p, item, n) == 0)
			return 0;
		p = end ? end + 1 : NULL;
	}
	if (*list == NULL) {
		*list = strdup(item);
		return *list ? 0 : fail("out of memory");
	}
	grown = realloc(*list, strlen(*list) + n + 2);
	if (grown == NULL)
		return fail("out of memory");
	strcat(grown, ",");
	strcat(grown, item);
	*list = grown;
	return 0;
}

static int is_path(const char *s)
{
	return s[0] == '/' || s[0] == '.';
}

/* One SRC[:DST[:FLAGS]] entry, checked as pyxis checks it. */
static int check_mount(const char *entry)
{
	char *copy = strdup(entry), *rest, *src, *dst;
	int rc = 0;

	if (copy == NULL)
		return fail("out of memory");
	rest = copy;
	src = strsep(&rest, ":");
	dst = rest ? strsep(&rest, ":") : src;
	if (empty(src) || empty(dst))
		rc = fail("--container-mounts: invalid format: %s", entry);
	else if (!is_path(src) && strcmp(src, "tmpfs") != 0 && strcmp(src, "umount") != 0)
		rc = fail("--container-mounts: mount source must be a relative path, an absolute path, \"tmpfs\" or "
			  "\"umount\": %s", entry);
	else if (!is_path(dst))
		rc = fail("--container-mounts: mount target must be a relative path or an absolute path: %s", entry);
	free(copy);
	return rc;
}

/* Splits a ','-separated argument; each item is checked by `check` (if any) and added to *list. */
static int add_items(char **list, const char *opt, const char *value, int (*check)(const char *))
{
	char *copy, *rest, *item;
	int rc = 0;

	if (empty(value))
		return fail("%s: argument required", opt);
	copy = strdup(value);
	if (copy == NULL)
		return fail("out of memory");
	rest = copy;
	while (rc == 0 && (item = strsep(&rest, ",")) != NULL) {
		if (*item == '\0')
			rc = fail("%s: invalid format: %s", opt, value);
		else if (check != NULL && check(item) < 0)
			rc = -1;
		else
			rc = list_add(list, item);
	}
	free(copy);
	return rc;
}

static int set_name(const char *value)
{
	const char *colon;
	char *name;
	const char *flags;
	int rc;

	if (empty(value))
		return fail("--container-name: argument required");
	colon = strchr(value, ':');
	name = colon ? strndup(value, (size_t)(colon - value)) : strdup(value);
	if (name == NULL)
		return fail("out of memory");
	flags = (colon && colon[1] != '\0') ? colon + 1 : "auto";
	if (*name == '\0')
		rc = fail("--container-name: empty name");
	else if (strcmp(flags, "auto") && strcmp(flags, "create") && strcmp(flags, "exec") &&
		 strcmp(flags, "no_exec"))
		rc = fail("--container-name: flag must be \"auto\", \"create\", \"exec\" or \"no_exec\"");
	else if ((rc = set_single(&args.name, "--container-name", name)) == 0)
		rc = set_single(&args.name_flags, "--container-name", flags);
	free(name);
	return rc;
}

static int opt_cb(int val, const char *optarg, int remote)
{
	(void)remote;
	switch (val) {
	case OPT_IMAGE:
		return set_single(&args.image, "--container-image", optarg);
	case OPT_MOUNTS:
		return add_items(&args.mounts, "--container-mounts", optarg, check_mount);
	case OPT_WORKDIR:
		return set_single(&args.workdir, "--container-workdir", optarg);
	case OPT_NAME:
		return set_name(optarg);
	case OPT_SAVE:
		if (!empty(optarg) && optarg[strlen(optarg) - 1] == '/')
			return fail("--container-save: target is a directory");
		return set_single(&args.save, "--container-save", optarg);
	case OPT_MOUNT_HOME:
		return set_flag(&args.mount_home, 1);
	case OPT_NO_MOUNT_HOME:
		return set_flag(&args.mount_home, 0);
	case OPT_REMAP_ROOT:
		return set_flag(&args.remap_root, 1);
	case OPT_NO_REMAP_ROOT:
		return set_flag(&args.remap_root, 0);
	case OPT_ENTRYPOINT:
		return set_flag(&args.entrypoint, 1);
	case OPT_NO_ENTRYPOINT:
		return set_flag(&args.entrypoint, 0);
	case OPT_ENTRYPOINT_LOG:
		return set_flag(&args.entrypoint_log, 1);
	case OPT_WRITABLE:
		return set_flag(&args.writable, 1);
	case OPT_READONLY:
		return set_flag(&args.writable, 0);
	case OPT_ENV:
		return add_items(&args.env, "--container-env", optarg, NULL);
	}
	return fail("unknown option id %d", val);
}

static int any_option(void)
{
	return args.image || args.mounts || args.workdir || args.name || args.save || args.env ||
	       args.mount_home.value != -1 || args.remap_root.value != -1 || args.entrypoint.value != -1 ||
	       args.entrypoint_log.value != -1 || args.writable.value != -1;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	spank_context_t ctx = spank_context();
	struct spank_option *o;

	(void)ac;
	(void)av;
	if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE && ctx != S_CTX_ALLOCATOR)
		return 0;
	for (o = options; o->name != NULL; o++) {
		spank_err_t rc = spank_option_register(sp, o);

		if (rc != ESPANK_SUCCESS)
			return fail("cannot register --%s: %s", o->name, spank_strerror(rc));
	}
	return 0;
}

/* srun, before the step is launched: say (with -v) what will NOT happen. */
int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	if (any_option())
		slurm_verbose("pyxis stand-in: no container: the step runs on the host (image %s is not used, "
			      "mounts are not applied)", args.image ? args.image : "(none)");
	return 0;
}

static int export_str(spank_t sp, const char *suffix, const char *value)
{
	char var[64];
	spank_err_t rc;

	snprintf(var, sizeof(var), ENV_PREFIX "%s", suffix);
	rc = value ? spank_setenv(sp, var, value, 1) : spank_unsetenv(sp, var);
	if (rc != ESPANK_SUCCESS && !(value == NULL && rc == ESPANK_ENV_NOEXIST))
		return fail("cannot %s %s: %s", value ? "set" : "unset", var, spank_strerror(rc));
	return 0;
}

static int export_flag(spank_t sp, const struct flag *f)
{
	return export_str(sp, f->env, f->value == -1 ? NULL : (f->value ? "1" : "0"));
}

/* In each task, just before exec (after Slurm's own chdir): the workdir and the recorded request. */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	if (export_str(sp, "STANDIN", any_option() ? "1" : NULL) || export_str(sp, "IMAGE", args.image) ||
	    export_str(sp, "MOUNTS", args.mounts) || export_str(sp, "WORKDIR", args.workdir) ||
	    export_str(sp, "NAME", args.name) || export_str(sp, "NAME_FLAGS", args.name_flags) ||
	    export_str(sp, "SAVE", args.save) || export_str(sp, "ENV", args.env) ||
	    export_flag(sp, &args.mount_home) || export_flag(sp, &args.remap_root) ||
	    export_flag(sp, &args.entrypoint) || export_flag(sp, &args.entrypoint_log) ||
	    export_flag(sp, &args.writable))
		return -1;
	if (args.workdir != NULL) {
		if (chdir(args.workdir) < 0)
			return fail("--container-workdir %s: %s (the stand-in runs on the host: the directory must "
				    "exist there)", args.workdir, strerror(errno));
		/* keep PWD in step with the new directory (as given when absolute, as a shell would) */
		if (args.workdir[0] == '/') {
			if (spank_setenv(sp, "PWD", args.workdir, 1) != ESPANK_SUCCESS)
				return fail("cannot set PWD");
		} else {
			char cwd[4096];

			if (getcwd(cwd, sizeof(cwd)) != NULL && spank_setenv(sp, "PWD", cwd, 1) != ESPANK_SUCCESS)
				return fail("cannot set PWD");
		}
	}
	return 0;
}
