/* hello: every rank says who and where it is. Exits with $HELLO_EXIT on the rank named by
 * $HELLO_EXIT_RANK (default: none), so tests can check exit-code propagation. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
  const char* rank = getenv("GOS_RANK");
  const char* size = getenv("GOS_SIZE");
  const char* node = getenv("GOS_NODE");
  const char* job = getenv("GOS_JOB");
  char host[256] = "?";
  gethostname(host, sizeof host);
  printf("hello from rank %s of %s on node %s (job %s, host %s, pid %d)\n", rank ? rank : "?",
         size ? size : "?", node ? node : "?", job ? job : "?", host, (int)getpid());
  const char* exit_rank = getenv("HELLO_EXIT_RANK");
  const char* code = getenv("HELLO_EXIT");
  if (exit_rank && code && rank && atoi(exit_rank) == atoi(rank)) return atoi(code);
  return 0;
}
