// dlock/dlock.hpp — everything: include this one header.
#pragma once

#include "dlock/connection_options.hpp"
#include "dlock/error.hpp"
#include "dlock/redis_client.hpp"
#include "dlock/reply.hpp"
#include "dlock/script.hpp"
#include "dlock/version.hpp"
