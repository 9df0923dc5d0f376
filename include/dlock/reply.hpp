// dlock/reply.hpp — moved to dlock/redis/reply.hpp with the rest of the Redis client
// layer; kept so that existing includes go on working.
#pragma once

#include "dlock/redis/reply.hpp"
