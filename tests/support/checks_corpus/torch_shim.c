/* Stable-ABI shim calls: aoti_torch_dtype_float32 predates 2.10 (always fine),
 * torch_exception_get_what was added in torch 2.13, torch_has_storage in 2.14. */
#include <stdint.h>

extern int32_t aoti_torch_dtype_float32(void);
extern const char *torch_exception_get_what(void);
extern int32_t torch_has_storage(void *tensor, int *has_storage);

const char *kn_shim(int32_t *dtype, void *tensor, int *has_storage) {
    *dtype = aoti_torch_dtype_float32() + torch_has_storage(tensor, has_storage);
    return torch_exception_get_what();
}
