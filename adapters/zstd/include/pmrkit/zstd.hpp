// pmrkit/zstd.hpp — the zstd adapter in one include: compressor and its pool, the bounded
// decompressor, OP_COMPRESSED and the errors. See each header for its rules.
#pragma once

#include "pmrkit/zstd/compressor.hpp"
#include "pmrkit/zstd/decompressor.hpp"
#include "pmrkit/zstd/errors.hpp"
#include "pmrkit/zstd/op_compressed.hpp"
