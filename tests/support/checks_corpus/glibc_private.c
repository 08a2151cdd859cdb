/* Plant: a GLIBC_PRIVATE symbol of the dynamic loader (non-numeric version). */
extern char _rtld_global[];

void *kn_private(void) { return _rtld_global; }
