// dlock/script.hpp — moved to dlock/redis/script.hpp with the rest of the Redis client
// layer; kept so that existing includes go on working.
#pragma once

#include "dlock/redis/script.hpp"
