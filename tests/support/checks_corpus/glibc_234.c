/* Plant: pthread_create moved into libc in glibc 2.34 -> GLIBC_2.34. */
#include <pthread.h>

static void *kn_run(void *argument) { return argument; }

int kn_spawn(void) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, kn_run, NULL) != 0) return -1;
    return pthread_join(thread, NULL);
}
