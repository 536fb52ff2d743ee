/*
 * Copyright The gpotel Authors
 * SPDX-License-Identifier: Apache-2.0
 *
 * gpotel_testbed_title: the testbed's emulation of Greenplum's session
 * number and command count in the process titles of a PostgreSQL 15
 * server (testbed/README.md, "Query identity"). Loaded with
 * shared_preload_libraries on the Greenplum dialects only.
 *
 * Coordinator (gpotel.content_id = -1): every client backend gets a session
 * number from a shared counter when it connects, as Greenplum's
 * gp_session_id (the one counter: the catalog draws from it too, for a
 * backend it finds no number of), and counts commands by Greenplum 6's rule (cdbvars.c
 * increment_command_count and its callers, read on 6.24.3):
 *   - +1 at the start of every simple-query message (exec_simple_query);
 *   - +1 for every planned statement when its executor starts (CreateQueryDesc);
 *   - +1 for a utility statement run by an extended-protocol Execute.
 * Its title is redrawn where Greenplum redraws it: after the simple-query
 * increment (a running planned statement shows N, its idle title N+1),
 * after each extended-protocol increment, and when the backend goes idle.
 *
 * Segment: a client backend tagged gpotel_sess=<n> in application_name is
 * an executor of session n. It numbers nothing itself: while a statement
 * runs it shows the count its dispatcher set in
 * gpotel_testbed.dispatch_command_count (the testbed's dispatch paths set
 * it, as Greenplum's dispatcher sends its count with each statement), and
 * none between statements, as a Greenplum executor resets it to 0.
 */
#include "postgres.h"

#include <limits.h>

#include "access/xact.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "libpq/auth.h"
#include "libpq/libpq.h"
#include "libpq/libpq-be.h"
#include "miscadmin.h"
#include "parser/analyze.h"
#include "replication/walsender.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/ps_status.h"
#include "utils/timestamp.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* The first session number: above PID_MAX_LIMIT (2^22), so none equals a pid. */
#define FIRST_SESSION_ID ((1 << 22) + 1)
#define SESSION_TAG "gpotel_sess="

typedef struct BackendSession
{
	int			pid;
	int			sess_id;
	TimestampTz started;
} BackendSession;

typedef struct SessionTable
{
	pg_atomic_uint32 next;
	BackendSession slots[FLEXIBLE_ARRAY_MEMBER];
} SessionTable;

static SessionTable *sessions;

static int	content_id = INT_MIN;	/* gpotel.content_id; INT_MIN: not read yet */
static int	sess_id;			/* con<N>; 0: none */
static int	command_count;		/* cmd<N>; 0: none */
static bool executing;			/* an executor running a dispatched statement */
static int	dispatch_command_count; /* gpotel_testbed.dispatch_command_count */
static int	reported_command_count; /* gpotel_testbed.command_count's storage: shown by show_command_count */
static bool message_counted;	/* this protocol message has been numbered */
static bool message_simple;		/* ... by the simple-query rule */
static bool reset_registered;
static MemoryContextCallback message_reset;

static shmem_request_hook_type prev_shmem_request_hook;
static shmem_startup_hook_type prev_shmem_startup_hook;
static ClientAuthentication_hook_type prev_client_auth_hook;
static post_parse_analyze_hook_type prev_post_parse_analyze_hook;
static ExecutorStart_hook_type prev_executor_start_hook;
static ProcessUtility_hook_type prev_process_utility_hook;
static emit_log_hook_type prev_emit_log_hook;
static PQcommMethods comm_methods;
static int	(*socket_putmessage) (char msgtype, const char *s, size_t len);

static Size
session_table_size(void)
{
	return add_size(offsetof(SessionTable, slots), mul_size(MaxBackends, sizeof(BackendSession)));
}

static void
request_shmem(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(session_table_size());
}

static void
startup_shmem(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	sessions = ShmemInitStruct("gpotel_testbed_title", session_table_size(), &found);
	if (!found)
	{
		memset(sessions, 0, session_table_size());
		pg_atomic_init_u32(&sessions->next, FIRST_SESSION_ID);
	}
	LWLockRelease(AddinShmemInitLock);
}

static bool
is_coordinator(void)
{
	if (content_id == INT_MIN)
	{
		const char *v = GetConfigOption("gpotel.content_id", true, false);

		content_id = v ? atoi(v) : 0;
	}
	return content_id == -1;
}

/* The client backends whose titles Greenplum numbers. */
static bool
numbered_backend(void)
{
	return MyProcPort != NULL && !am_walsender && MyBackendType == B_BACKEND && IsUnderPostmaster;
}

/* An executor's session: the number its application_name is tagged with. */
static int
tagged_session(void)
{
	const char *app = GetConfigOption("application_name", true, false);
	long		n;

	if (app == NULL || strncmp(app, SESSION_TAG, strlen(SESSION_TAG)) != 0)
		return 0;
	n = strtol(app + strlen(SESSION_TAG), NULL, 10);
	return (n > 0 && n <= INT_MAX) ? (int) n : 0;
}

/* Redraws the title's prefix, keeping its activity. */
static void
redraw_title(void)
{
	StringInfoData fixed;
	int			len;
	const char *shown;
	char		activity[256];

	if (!numbered_backend())
		return;
	if (!is_coordinator() && sess_id == 0)
		sess_id = tagged_session();
	if (sess_id == 0)
		return;
	shown = get_ps_display(&len);
	len = Min(len, (int) sizeof(activity) - 1);
	memcpy(activity, shown, len);
	activity[len] = '\0';

	/* PostgreSQL's own fixed part (postmaster.c BackendInitialize), then Greenplum's. */
	initStringInfo(&fixed);
	appendStringInfo(&fixed, "%s %s %s", MyProcPort->user_name, MyProcPort->database_name, MyProcPort->remote_host);
	if (MyProcPort->remote_port[0] != '\0')
		appendStringInfo(&fixed, "(%s)", MyProcPort->remote_port);
	appendStringInfo(&fixed, " con%d", sess_id);
	if (!is_coordinator())
		appendStringInfo(&fixed, " seg%d", content_id);
	if (command_count > 0)
		appendStringInfo(&fixed, " cmd%d", command_count);
	if (!is_coordinator() && executing)
		appendStringInfoString(&fixed, " slice1");
	init_ps_display(fixed.data);
	set_ps_display(activity);
	pfree(fixed.data);
}

static void
forget_message(void *arg)
{
	message_counted = message_simple = reset_registered = false;
}

/* Counts one command on the coordinator (Greenplum's increment_command_count). */
static void
count_command(bool simple_start)
{
	command_count++;
	if (command_count <= 0)
		command_count = 1;
	message_counted = true;
	message_simple = message_simple || simple_start;
	if (!reset_registered && MessageContext != NULL)
	{
		message_reset.func = forget_message;
		message_reset.arg = NULL;
		MemoryContextRegisterResetCallback(MessageContext, &message_reset);
		reset_registered = true;
	}
	/* A simple query's title shows the count of its start until it goes idle. */
	if (simple_start || !message_simple)
		redraw_title();
}

/* An executor takes its dispatcher's count when a statement starts. */
static void
take_dispatched_count(void)
{
	if (executing && command_count == dispatch_command_count)
		return;
	command_count = dispatch_command_count;
	executing = true;
	redraw_title();
}

static bool
activity_is(const char *what)
{
	int			len;
	const char *shown = get_ps_display(&len);

	return len == (int) strlen(what) && strncmp(shown, what, len) == 0;
}

static void
on_post_parse_analyze(ParseState *pstate, Query *query, JumbleState *jstate)
{
	if (prev_post_parse_analyze_hook)
		prev_post_parse_analyze_hook(pstate, query, jstate);
	/*
	 * The first statement of a simple-query message: analysed without
	 * parameters (an extended-protocol Parse has them), not while a Bind
	 * revalidates a cached plan, not inside another statement.
	 */
	if (numbered_backend() && is_coordinator() && !message_counted &&
		pstate->p_paramref_hook == NULL && !activity_is("BIND") && !activity_is("PARSE"))
		count_command(true);
}

static void
on_executor_start(QueryDesc *queryDesc, int eflags)
{
	if (numbered_backend())
	{
		if (is_coordinator())
			count_command(false);
		else
			take_dispatched_count();
	}
	if (prev_executor_start_hook)
		prev_executor_start_hook(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

static void
on_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				   ProcessUtilityContext context, ParamListInfo params,
				   QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	if (numbered_backend() && context == PROCESS_UTILITY_TOPLEVEL)
	{
		if (!is_coordinator())
			take_dispatched_count();
		else if (!message_counted)
			count_command(false);	/* an extended-protocol Execute of a utility */
	}
	if (prev_process_utility_hook)
		prev_process_utility_hook(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
}

/*
 * A simple query that fails before its first statement is analysed
 * (a syntax error, an unknown column) was still numbered at its start.
 */
static void
on_emit_log(ErrorData *edata)
{
	if (edata->elevel >= ERROR && numbered_backend() && is_coordinator() && !message_counted &&
		debug_query_string != NULL && !activity_is("BIND") && !activity_is("PARSE"))
		count_command(true);
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/* ReadyForQuery: the backend has gone idle, its title says so. */
static int
on_putmessage(char msgtype, const char *s, size_t len)
{
	if (msgtype == 'Z')
	{
		if (!is_coordinator())
			executing = false, command_count = 0;
		redraw_title();
	}
	return socket_putmessage(msgtype, s, len);
}

static void
on_transaction_end(XactEvent event, void *arg)
{
	/* Report the count to the client with ReadyForQuery (GUC_REPORT). */
	if ((event == XACT_EVENT_PRE_COMMIT || event == XACT_EVENT_ABORT) && numbered_backend() && is_coordinator())
		SetConfigOption("gpotel_testbed.command_count", "0", PGC_INTERNAL, PGC_S_OVERRIDE);
}

static const char *
show_command_count(void)
{
	static char buf[16];

	snprintf(buf, sizeof(buf), "%d", command_count);
	return buf;
}

static void
on_client_authentication(Port *port, int status)
{
	if (prev_client_auth_hook)
		prev_client_auth_hook(port, status);
	if (status != STATUS_OK || !numbered_backend())
		return;
	socket_putmessage = PqCommMethods->putmessage;
	comm_methods = *PqCommMethods;
	comm_methods.putmessage = on_putmessage;
	PqCommMethods = &comm_methods;
	if (is_coordinator() && sessions != NULL && MyProc != NULL && MyProc->pgprocno < MaxBackends)
	{
		BackendSession *slot = &sessions->slots[MyProc->pgprocno];

		/*
		 * The slot keeps its backend's number after it exits, until the next
		 * backend of this PGPROC takes it: a row first read as its backend
		 * exits still finds the number its title showed. A reader that
		 * catches the slot changing hands sees pid 0 or another start.
		 */
		sess_id = (int) pg_atomic_fetch_add_u32(&sessions->next, 1);
		slot->pid = 0;
		pg_write_barrier();
		slot->started = MyStartTimestamp;
		pg_write_barrier();
		slot->sess_id = sess_id;
		pg_write_barrier();
		slot->pid = MyProcPid;
		redraw_title();
	}
}

PG_FUNCTION_INFO_V1(gpotel_testbed_backend_sess_id);

/*
 * The session number of backend (pid, backend_start), running or exited
 * while its slot is not yet another's; NULL: none.
 */
Datum
gpotel_testbed_backend_sess_id(PG_FUNCTION_ARGS)
{
	int			pid = PG_GETARG_INT32(0);
	TimestampTz started = PG_GETARG_TIMESTAMPTZ(1);

	for (int i = 0; sessions != NULL && i < MaxBackends; i++)
	{
		BackendSession *slot = &sessions->slots[i];

		if (slot->pid == pid && slot->started == started)
		{
			int			id;

			pg_read_barrier();
			id = slot->sess_id;
			pg_read_barrier();
			if (slot->pid == pid && slot->started == started && id > 0)
				PG_RETURN_INT32(id);
		}
	}
	PG_RETURN_NULL();
}

PG_FUNCTION_INFO_V1(gpotel_testbed_next_sess_id);

/* A new session number, from the counter that numbers backends as they connect. */
Datum
gpotel_testbed_next_sess_id(PG_FUNCTION_ARGS)
{
	if (sessions == NULL)
		ereport(ERROR, (errmsg("gpotel_testbed_title's session counter is not in shared memory")));
	PG_RETURN_INT32((int) pg_atomic_fetch_add_u32(&sessions->next, 1));
}

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR, (errmsg("gpotel_testbed_title must be loaded with shared_preload_libraries")));

	DefineCustomIntVariable("gpotel_testbed.dispatch_command_count",
							"Testbed emulation: the command count a dispatcher sends with the next statements.",
							NULL, &dispatch_command_count, 0, 0, INT_MAX, PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("gpotel_testbed.command_count",
							"Testbed emulation: this backend's command count (Greenplum's gp_command_count).",
							NULL, &reported_command_count, 0, 0, INT_MAX, PGC_INTERNAL, GUC_REPORT | GUC_NOT_IN_SAMPLE,
							NULL, NULL, show_command_count);
	MarkGUCPrefixReserved("gpotel_testbed");

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = request_shmem;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = startup_shmem;
	prev_client_auth_hook = ClientAuthentication_hook;
	ClientAuthentication_hook = on_client_authentication;
	prev_post_parse_analyze_hook = post_parse_analyze_hook;
	post_parse_analyze_hook = on_post_parse_analyze;
	prev_executor_start_hook = ExecutorStart_hook;
	ExecutorStart_hook = on_executor_start;
	prev_process_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = on_process_utility;
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = on_emit_log;
	RegisterXactCallback(on_transaction_end, NULL);
}
