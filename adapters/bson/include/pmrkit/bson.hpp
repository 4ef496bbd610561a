// pmrkit/bson.hpp — the bson adapter in one include: wire format, OP_MSG reader, OP_COMPRESSED
// framing, documents, value types, insert messages and the opt-in global allocator. See each
// header for its rules.
#pragma once

#include "pmrkit/bson/document.hpp"
#include "pmrkit/bson/global_allocator.hpp"
#include "pmrkit/bson/insert_message.hpp"
#include "pmrkit/bson/op_compressed.hpp"
#include "pmrkit/bson/op_msg_reader.hpp"
#include "pmrkit/bson/value_types.hpp"
#include "pmrkit/bson/wire_format.hpp"
