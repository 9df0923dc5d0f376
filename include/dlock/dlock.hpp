// dlock/dlock.hpp — everything: include this one header.
#pragma once

#include "dlock/client.hpp"
#include "dlock/connection_options.hpp"
#include "dlock/error.hpp"
#include "dlock/fencing.hpp"
#include "dlock/keys.hpp"
#include "dlock/lease.hpp"
#include "dlock/lock.hpp"
#include "dlock/redis_client.hpp"
#include "dlock/reply.hpp"
#include "dlock/script.hpp"
#include "dlock/version.hpp"
