/* errhandler: error handlers of the program's own (MPI_Comm_create_errhandler). A failing
 * call on a communicator with one calls it with that communicator and the error code, then
 * returns the code; the handler may call MPI; MPI_Comm_call_errhandler calls it too and
 * returns MPI_SUCCESS; a duplicate inherits it; freeing the handle keeps it on the
 * communicators that use it; MPI_Errhandler_create (MPI 1) makes one as well; error classes,
 * codes and texts of the program's own (MPI_Add_error_class/_code/_string). Plain portable
 * MPI: the answers are Open MPI's too (built with -DOMPI_OMIT_MPI1_COMPAT_DECLS=0 there, for
 * the MPI-1 call). */
#include "check.h"

static int g_calls = 0, g_code = MPI_SUCCESS, g_rank_seen = -1;
static MPI_Comm g_comm = MPI_COMM_NULL;

static void Handler(MPI_Comm* comm, int* code, ...) {
  ++g_calls;
  g_code = *code;
  g_comm = *comm;
  MPI_Comm_rank(*comm, &g_rank_seen); /* MPI from inside the handler */
}

static int g_old_calls = 0;
static void OldHandler(MPI_Comm* comm, int* code, ...) {
  (void)comm;
  (void)code;
  ++g_old_calls;
}

static int ErrorClass(int code) {
  int c = -1;
  MPI_Error_class(code, &c);
  return c;
}

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "errhandler");
  MPI_Comm dup;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  MPI_Errhandler eh;
  CHECK_MPI(MPI_Comm_create_errhandler(Handler, &eh));
  CHECK_MPI(MPI_Comm_set_errhandler(dup, eh));
  MPI_Errhandler got;
  CHECK_MPI(MPI_Comm_get_errhandler(dup, &got));
  CHECK(got == eh, "get_errhandler gave another handler");

  /* A send to a rank that does not exist fails on dup: the handler sees dup and the code. */
  int v = 1;
  int rc = MPI_Send(&v, 1, MPI_INT, g_size + 5, 0, dup);
  CHECK(rc != MPI_SUCCESS, "a send to rank %d succeeded", g_size + 5);
  CHECK(ErrorClass(rc) == MPI_ERR_RANK, "class %d, not MPI_ERR_RANK", ErrorClass(rc));
  CHECK(g_calls == 1, "handler called %d times", g_calls);
  CHECK(g_code == rc, "handler saw %d, the call returned %d", g_code, rc);
  int same = MPI_UNEQUAL;
  MPI_Comm_compare(g_comm, dup, &same);
  CHECK(same == MPI_IDENT, "the handler saw another communicator");
  CHECK(g_rank_seen == g_rank, "MPI_Comm_rank in the handler gave %d", g_rank_seen);

  /* MPI_Comm_call_errhandler. */
  rc = MPI_Comm_call_errhandler(dup, MPI_ERR_OTHER);
  CHECK(rc == MPI_SUCCESS, "MPI_Comm_call_errhandler returned %d", rc);
  CHECK(g_calls == 2 && g_code == MPI_ERR_OTHER, "calls %d code %d", g_calls, g_code);

  /* A duplicate inherits it; freeing the handle leaves it in place. */
  MPI_Comm dup2;
  CHECK_MPI(MPI_Comm_dup(dup, &dup2));
  CHECK_MPI(MPI_Errhandler_free(&eh));
  CHECK(eh == MPI_ERRHANDLER_NULL, "the freed handle was not reset");
  rc = MPI_Send(&v, -1, MPI_INT, 0, 0, dup2);
  CHECK(ErrorClass(rc) == MPI_ERR_COUNT, "class %d, not MPI_ERR_COUNT", ErrorClass(rc));
  CHECK(g_calls == 3 && g_code == rc, "calls %d code %d (returned %d)", g_calls, g_code, rc);
  MPI_Comm_compare(g_comm, dup2, &same);
  CHECK(same == MPI_IDENT, "the handler saw another communicator than dup2");

  /* MPI_COMM_WORLD keeps its own handler: set one made with the MPI-1 call, then back. */
  MPI_Errhandler old;
  CHECK_MPI(MPI_Errhandler_create(OldHandler, &old));
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, old));
  rc = MPI_Recv(&v, 1, MPI_INT, -7, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(ErrorClass(rc) == MPI_ERR_RANK, "class %d, not MPI_ERR_RANK", ErrorClass(rc));
  CHECK(g_old_calls == 1 && g_calls == 3, "old %d, new %d", g_old_calls, g_calls);
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  CHECK_MPI(MPI_Errhandler_free(&old));

  /* Error classes and codes of the program's own, with texts, through a handler. */
  int cls = -1, code = -1;
  CHECK_MPI(MPI_Add_error_class(&cls));
  CHECK_MPI(MPI_Add_error_code(cls, &code));
  CHECK(cls > MPI_ERR_LASTCODE && code > cls, "class %d code %d", cls, code);
  CHECK_MPI(MPI_Add_error_string(cls, "the class of the test"));
  CHECK_MPI(MPI_Add_error_string(code, "a code of the test"));
  /* (Of the class itself Open MPI 4.1.4 answers MPI_ERR_UNKNOWN: not checked.) */
  CHECK(ErrorClass(code) == cls, "class of the code %d, not %d", ErrorClass(code), cls);
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  CHECK_MPI(MPI_Error_string(code, text, &len));
  CHECK(strcmp(text, "a code of the test") == 0 && len == (int)strlen(text), "text '%s'", text);
  int* last = NULL;
  int flag = 0;
  CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag));
  CHECK(flag && last != NULL && *last >= code, "MPI_LASTUSEDCODE %d, code %d",
        flag && last ? *last : -1, code);
  rc = MPI_Comm_call_errhandler(dup2, code);
  CHECK(rc == MPI_SUCCESS && g_calls == 4 && g_code == code, "rc %d calls %d code %d", rc, g_calls,
        g_code);

  /* The communicators still work. */
  int sum = 0, one = 1;
  CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, dup2));
  CHECK(sum == g_size, "sum %d", sum);
  CHECK_MPI(MPI_Comm_free(&dup2));
  CHECK_MPI(MPI_Comm_free(&dup));
  return FinishTest();
}
