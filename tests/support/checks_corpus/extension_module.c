/* A minimal abi3 Python extension module (the variant's <id>.abi3.so):
 * -DKN_MODULE=<id> names the module and its PyInit_<id> function. */
#define Py_LIMITED_API 0x03090000
#include <Python.h>

#define KN_STR2(x) #x
#define KN_STR(x) KN_STR2(x)
#define KN_CAT2(a, b) a##b
#define KN_CAT(a, b) KN_CAT2(a, b)

static struct PyModuleDef kn_module = {PyModuleDef_HEAD_INIT, KN_STR(KN_MODULE), NULL, -1, NULL};

PyMODINIT_FUNC KN_CAT(PyInit_, KN_MODULE)(void) { return PyModule_Create(&kn_module); }
