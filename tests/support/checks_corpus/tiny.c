/* A self-built library that no user machine has (DT_NEEDED target). */
int kn_tiny_answer(void) { return 42; }
