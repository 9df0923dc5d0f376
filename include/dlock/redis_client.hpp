// dlock/redis_client.hpp — moved to dlock/redis/client.hpp with the rest of the Redis client
// layer; kept so that existing includes go on working.
#pragma once

#include "dlock/redis/client.hpp"
