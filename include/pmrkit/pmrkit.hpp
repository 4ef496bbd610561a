// pmrkit/pmrkit.hpp — everything in the core library, in one include.
// Each header below states its own thread-safety and ownership rules.
#pragma once

#include "pmrkit/aligned_pool_resource.hpp"
#include "pmrkit/allocation_error.hpp"
#include "pmrkit/boost_pool_resource.hpp"
#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/byte_buffer.hpp"
#include "pmrkit/checked_resource.hpp"
#include "pmrkit/counting_resource.hpp"
#include "pmrkit/function_ref.hpp"
#include "pmrkit/mimalloc_resource.hpp"
#include "pmrkit/recording_resource.hpp"
#include "pmrkit/registry.hpp"
#include "pmrkit/single_writer_counter.hpp"
#include "pmrkit/size_class_resource.hpp"
