/* Plant: a CPython-internal function outside the stable ABI. */
extern void **_PyObject_GetDictPtr(void *object);

void **kn_dict_pointer(void *object) { return _PyObject_GetDictPtr(object); }
