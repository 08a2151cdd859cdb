// Half-precision conversions: gcc compiles them to calls of libgcc helpers
// (__extendhfsf2, __truncsfhf2) that libgcc_s.so.1 exports only from
// GCC_12.0.0 on. tests/e2e/test_libstdcxx.py links this with a shared libgcc
// to show where those helpers come from.
extern "C" float widen(_Float16 half) { return half; }
extern "C" _Float16 narrow(float value) { return value; }
