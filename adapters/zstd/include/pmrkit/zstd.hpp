// pmrkit/zstd.hpp — the zstd adapter in one include: compressor and its pool, the bounded
// decompressor and the errors. See each header for its rules. (MongoDB's OP_COMPRESSED framing
// is pmrkit/bson/op_compressed.hpp, which takes these compressors as they are.)
#pragma once

#include "pmrkit/zstd/compressor.hpp"
#include "pmrkit/zstd/decompressor.hpp"
#include "pmrkit/zstd/errors.hpp"
