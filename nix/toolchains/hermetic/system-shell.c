/* system(3) through the registry's shell. nvcc runs each of its steps (the host
   compiler, cicc, ptxas, fatbinary) through system(), and the C library's
   system() runs /bin/sh, which the Nix sandbox has only where Nix was built
   with a sandbox shell (Debian's Nix has none). Preloaded (LD_PRELOAD) into the
   build of CUDA variants, this system() runs the same command with the store
   shell KERNELNIX_SHELL instead: it leans on no detail of the sandbox. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int system(const char *command) {
  if (command == NULL) return 1;
  struct sigaction ignore = {.sa_handler = SIG_IGN}, old_int, old_quit;
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  pid_t child = fork();
  if (child == 0) {
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    execl(KERNELNIX_SHELL, "sh", "-c", command, (char *)NULL);
    _exit(127);
  }
  int status = -1;
  if (child > 0) {
    while (waitpid(child, &status, 0) < 0) {
      if (errno != EINTR) {
        status = -1;
        break;
      }
    }
  }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGQUIT, &old_quit, NULL);
  return status;
}
