// dlock/dlock.hpp — everything: include this one header.
#pragma once

// Locks, leases and the client that hands them out.
#include "dlock/async.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/fencing.hpp"
#include "dlock/keys.hpp"
#include "dlock/latch.hpp"
#include "dlock/lease.hpp"
#include "dlock/lock.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/observe.hpp"
#include "dlock/read_write_lock.hpp"
#include "dlock/semaphore.hpp"
#include "dlock/version.hpp"

// The Redis client layer beneath them.
#include "dlock/redis/client.hpp"
#include "dlock/redis/connection_options.hpp"
#include "dlock/redis/reply.hpp"
#include "dlock/redis/script.hpp"
