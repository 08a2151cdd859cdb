/* Plant: PyType_GetName joined the stable ABI in Python 3.11 (> 3.9). */
extern void *PyType_GetName(void *type);
extern void *PyUnicode_FromString(const char *text);

void *kn_type_name(void *type) {
    return type ? PyType_GetName(type) : PyUnicode_FromString("?");
}
