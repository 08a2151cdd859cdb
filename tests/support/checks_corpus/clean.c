/* Clean: only old glibc symbols and one stable-ABI (abi3, Python 3.2) call. */
#include <stdlib.h>
#include <string.h>

extern void *PyUnicode_FromString(const char *text);

void *kn_clean_copy(const char *text) {
    size_t length = strlen(text);
    char *copy = malloc(length + 1);
    if (copy == NULL) return NULL;
    memcpy(copy, text, length + 1);
    void *result = PyUnicode_FromString(copy);
    free(copy);
    return result;
}
