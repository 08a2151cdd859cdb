/* Plant: DT_NEEDED libkntiny.so, which is neither a system, Torch nor CUDA library. */
int kn_tiny_answer(void);

int kn_uses_tiny(void) { return kn_tiny_answer() + 1; }
