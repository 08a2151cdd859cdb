/* Stable-ABI shim calls: aoti_torch_dtype_float32 predates 2.10 (always fine),
 * torch_exception_get_what was added in torch 2.13. */
#include <stdint.h>

extern int32_t aoti_torch_dtype_float32(void);
extern const char *torch_exception_get_what(void);

const char *kn_shim(int32_t *dtype) {
    *dtype = aoti_torch_dtype_float32();
    return torch_exception_get_what();
}
