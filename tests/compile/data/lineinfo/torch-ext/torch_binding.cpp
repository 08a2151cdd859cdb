#include <torch/library.h>

#include "registration.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
