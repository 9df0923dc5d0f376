// dlock/connection_options.hpp — moved to dlock/redis/connection_options.hpp with the rest of the
// Redis client layer; kept so that existing includes go on working.
#pragma once

#include "dlock/redis/connection_options.hpp"
