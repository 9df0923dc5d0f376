#!/usr/bin/env node
// Peer driver for bench/peers/run: node-redlock (Redlock over one ioredis client) and
// redis-semaphore's Mutex (ioredis), measured in the same scenarios and with the same metric
// names as dlock's own benchmark (bench/lock_scenarios.hpp):
//
//   uncontended  one worker, one key, sequential acquire+release            -> pairs/s
//   throughput   N concurrent async workers, one key each, one shared
//                ioredis client (--throughput-clients per-worker: one each)  -> pairs/s
//   handoff      W workers, one key, each loops acquire -> release at once,
//                one ioredis client per worker ("W-clients") and one shared
//                client ("shared-client")                                   -> hand-offs/s,
//                acquisitions/s, commands/acquisition, release->next p50/p99
//
// Settings: "default" = the library's own retry timing, "aggressive" = the shortest sensible
// retry delay. In both, acquisition retries until it succeeds (redlock retryCount -1 on acquire,
// redis-semaphore acquireTimeout Infinity), and every lease is 30 s.
//
// Prints one JSON object per line per result on stdout; progress goes to stderr.
//
//   node node_peers.js --url redis://127.0.0.1:6379 --seconds 3 \
//       [--peer redlock|semaphore|all] [--settings default|aggressive|all] \
//       [--scenario uncontended,throughput,handoff] [--threads 1,4,16,64] [--workers 8] \
//       [--handoff-clients both|shared|per-worker] [--throughput-clients shared|per-worker]
//       [--redlock-masters URL2,URL3,...]
//
// --redlock-masters: node-redlock over several independent masters (--url is the first; one
// ioredis client per master, as its users run it) instead of one.
'use strict';

const { performance } = require('perf_hooks');
const Redis = require('ioredis');
const redlockModule = require('redlock');
const Redlock = redlockModule.default || redlockModule.Redlock || redlockModule;
const { Mutex } = require('redis-semaphore');

const LEASE_MS = 30000;
const KEY_PREFIX = 'dlock-bench:peer:';
const path = require('path');
const fs = require('fs');
const version = (name) =>
  JSON.parse(fs.readFileSync(path.join(__dirname, 'node_modules', name, 'package.json'), 'utf8'))
    .version.replace(/^v/, '');

// ---- arguments -------------------------------------------------------------------------------

function usage(message) {
  if (message) process.stderr.write(`node_peers: ${message}\n`);
  process.stderr.write(
    'usage: node_peers.js --url URL [--seconds N] [--peer redlock|semaphore|all]\n' +
      '         [--settings default|aggressive|all] [--scenario a,b,c] [--threads 1,4,16,64]\n' +
      '         [--workers 8] [--handoff-clients both|shared|per-worker]\n' +
      '         [--throughput-clients shared|per-worker]\n',
  );
  process.exit(64);
}

function parseArgs(argv) {
  const o = {
    url: process.env.DLOCK_URL || 'redis://127.0.0.1:6379',
    seconds: 3,
    peers: ['redlock', 'semaphore'],
    settings: ['default', 'aggressive'],
    scenarios: ['uncontended', 'throughput', 'handoff'],
    threads: [1, 4, 16, 64],
    workers: 8,
    handoffClients: 'both',
    throughputClients: 'shared',
  };
  const list = (v) => v.split(',').map((s) => s.trim()).filter(Boolean);
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const eq = a.indexOf('=');
    const key = eq > 0 ? a.slice(0, eq) : a;
    const value = () => {
      if (eq > 0) return a.slice(eq + 1);
      if (i + 1 >= argv.length) usage(`${key} needs a value`);
      return argv[++i];
    };
    switch (key) {
      case '--url': o.url = value(); break;
      case '--redlock-masters': o.redlockMasters = list(value()); break;
      case '--seconds': o.seconds = Number(value()); break;
      case '--peer': {
        const v = value();
        o.peers = v === 'all' ? ['redlock', 'semaphore'] : list(v);
        break;
      }
      case '--settings': {
        const v = value();
        o.settings = v === 'all' ? ['default', 'aggressive'] : list(v);
        break;
      }
      case '--scenario': case '--scenarios': {
        const v = value();
        o.scenarios = v === 'all' ? ['uncontended', 'throughput', 'handoff'] : list(v);
        break;
      }
      case '--threads': o.threads = list(value()).map(Number); break;
      case '--workers': o.workers = Number(value()); break;
      case '--handoff-clients': o.handoffClients = value(); break;
      case '--throughput-clients': o.throughputClients = value(); break;
      case '-h': case '--help': usage(); break;
      default: usage(`unknown argument ${a}`);
    }
  }
  if (!(o.seconds > 0)) usage('--seconds must be positive');
  for (const p of o.peers) if (!PEERS[p]) usage(`unknown peer ${p}`);
  for (const s of o.settings) if (s !== 'default' && s !== 'aggressive') usage(`unknown settings ${s}`);
  for (const s of o.scenarios) {
    if (!['uncontended', 'throughput', 'handoff'].includes(s)) usage(`unknown scenario ${s}`);
  }
  if (o.threads.some((t) => !(t >= 1))) usage('--threads must be positive integers');
  if (!(o.workers >= 2)) usage('--workers must be at least 2');
  if (!['both', 'shared', 'per-worker'].includes(o.handoffClients)) usage('bad --handoff-clients');
  if (!['shared', 'per-worker'].includes(o.throughputClients)) usage('bad --throughput-clients');
  return o;
}

// ---- the peers -------------------------------------------------------------------------------
//
// Each peer makes a "locker" over one ioredis client: acquire(key) -> handle (retrying until it
// has the lock), release(handle). `attempts` is reported when the library exposes it.

const PEERS = {
  redlock: {
    name: 'node-redlock',
    version: () => `redlock ${version('redlock')}, ioredis ${version('ioredis')}`,
    settings: {
      // The library's defaults are retryCount 10, retryDelay 200, retryJitter 100,
      // driftFactor 0.01; acquire() is called with retryCount -1 (retry forever).
      default: { retryDelay: 200, retryJitter: 100 },
      aggressive: { retryDelay: 1, retryJitter: 0 },
    },
    describe: (s) =>
      `Redlock([${1 + redlockMasters.length} ioredis client(s), one per master]) retryDelay=${s.retryDelay} ms retryJitter=${s.retryJitter} ms ` +
      `driftFactor=0.01; acquire(retryCount=-1 i.e. until acquired), release() with retryCount=10 ` +
      `(default); lease ${LEASE_MS} ms`,
    // With the real default retryCount (10), an acquisition that needs more than 11 attempts
    // fails with ExecutionError.
    defaultLimitNote: 'acquisitions needing > 11 attempts (would throw ExecutionError at the default retryCount 10)',
    overDefaultLimit: (acq) => acq.attempts > 11,
    makeLocker(client, s) {
      const clients = [client, ...redlockMasters.map((url) => extraClient(url))];
      const redlock = new Redlock(clients, { retryDelay: s.retryDelay, retryJitter: s.retryJitter });
      // Redlock emits "error" (ResourceLockedError) for every failed attempt; an EventEmitter
      // without a listener would throw it.
      redlock.on('error', () => {});
      return {
        async acquire(key) {
          const lock = await redlock.acquire([key], LEASE_MS, { retryCount: -1 });
          return { handle: lock, attempts: lock.attempts.length };
        },
        async release(h) {
          await h.release();
        },
      };
    },
  },
  semaphore: {
    name: 'redis-semaphore',
    version: () => `redis-semaphore ${version('redis-semaphore')}, ioredis ${version('ioredis')}`,
    settings: {
      // The library's defaults are acquireTimeout 10000, acquireAttemptsLimit Infinity,
      // retryInterval 10, lockTimeout 10000, refreshInterval 0.8 x lockTimeout.
      default: { retryInterval: 10 },
      aggressive: { retryInterval: 1 },
    },
    describe: (s) =>
      `new Mutex(ioredis, key, {lockTimeout: ${LEASE_MS}, acquireTimeout: Infinity, ` +
      `retryInterval: ${s.retryInterval}}) per acquisition (refreshInterval default 0.8 x lockTimeout); ` +
      `acquire() = SET NX PX loop, release() = compare-and-delete EVALSHA`,
    defaultLimitNote: 'acquisitions that waited > 10 s (would throw TimeoutError at the default acquireTimeout 10000)',
    overDefaultLimit: (acq) => acq.waitMs > 10000,
    makeLocker(client, s) {
      const options = {
        lockTimeout: LEASE_MS,
        acquireTimeout: Number.POSITIVE_INFINITY,
        retryInterval: s.retryInterval,
      };
      return {
        async acquire(key) {
          const mutex = new Mutex(client, key, options);
          await mutex.acquire();
          return { handle: mutex, attempts: NaN };
        },
        async release(h) {
          await h.release();
        },
      };
    },
  },
};

// ---- redis helpers ---------------------------------------------------------------------------

// Client-side count of the commands our lock clients send (not the control client's).
const sent = new Map();
{
  const original = Redis.prototype.sendCommand;
  Redis.prototype.sendCommand = function (command, stream) {
    if (this.__dlockCounted && command && command.name) {
      const name = String(command.name).toLowerCase();
      sent.set(name, (sent.get(name) || 0) + 1);
    }
    return original.call(this, command, stream);
  };
}

const openClients = [];
async function newClient(url, counted) {
  const c = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, enableOfflineQueue: true });
  c.on('error', () => {}); // reported through the failing command instead
  c.__dlockCounted = counted;
  openClients.push(c);
  await c.connect();
  return c;
}

// The other RedLock masters' clients of one locker (connecting in the background; commands
// wait in ioredis' offline queue until then).
let redlockMasters = [];
function extraClient(url) {
  const c = new Redis(url, { maxRetriesPerRequest: 1, enableOfflineQueue: true });
  c.on('error', () => {});
  c.__dlockCounted = true;
  openClients.push(c);
  return c;
}

async function closeClients() {
  const all = openClients.splice(0);
  await Promise.all(all.map((c) => c.quit().catch(() => c.disconnect())));
}

// INFO commandstats -> {command: calls}
async function commandCalls(control) {
  const text = await control.info('commandstats');
  const calls = {};
  for (const line of text.split(/\r?\n/)) {
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (m) calls[m[1]] = Number(m[2]);
  }
  return calls;
}

async function deleteBenchKeys(control) {
  for (const pattern of [`${KEY_PREFIX}*`, `mutex:${KEY_PREFIX}*`]) {
    let cursor = '0';
    do {
      const [next, keys] = await control.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await control.del(...keys);
    } while (cursor !== '0');
  }
}

// Commands per step from the commandstats delta, counting only the commands our lock clients
// sent (as seen client-side); none of these peers' scripts run a command its client also sends
// directly, so this is the number of client-issued commands. Script-internal calls (and the
// breakdown) are reported beside it.
function commandFigures(before, after, steps) {
  const delta = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] || 0);
    if (d > 0) delta[k] = d;
  }
  // The control connection's own INFO, and nothing else, runs in the window.
  delete delta.info;
  const clientSent = Object.fromEntries(sent);
  let server = 0;
  let internal = 0;
  for (const [k, v] of Object.entries(delta)) {
    if (clientSent[k] !== undefined) server += v;
    else internal += v;
  }
  const client = Object.values(clientSent).reduce((a, b) => a + b, 0);
  const per = (x) => (steps > 0 ? x / steps : 0);
  const breakdown = Object.entries(delta)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k}=${per(v).toFixed(3)}${clientSent[k] !== undefined ? '' : '*'}`)
    .join(' ');
  return {
    perStep: per(server),
    extra: {
      client_counted_commands_per_step: per(client),
      script_internal_calls_per_step: per(internal),
      commandstats_per_step: breakdown + ' (* = only run inside scripts)',
      client_commands: Object.keys(clientSent).sort().join(','),
    },
  };
}

// ---- timing ----------------------------------------------------------------------------------

const now = () => performance.now(); // ms, sub-microsecond resolution
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function median(xs) {
  return percentile(xs, 50);
}
function percentile(xs, p) {
  if (!xs.length) return 0;
  const v = Float64Array.from(xs).sort();
  const rank = (p / 100) * (v.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.min(v.length - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - lo);
}

async function pingRtt(client, seconds) {
  const xs = [];
  const until = now() + seconds * 1000;
  do {
    const t0 = now();
    await client.ping();
    xs.push((now() - t0) * 1000);
  } while (now() < until);
  return median(xs);
}

// Runs `n` workers, each calling step(w) in a loop for `seconds`, after one warm-up step each.
// Counts the steps that completed inside the window [started, stopped].
async function runTimed(control, n, seconds, step, onStart) {
  await Promise.all(Array.from({ length: n }, (_, w) => step(w)));
  const before = await commandCalls(control);
  sent.clear();
  if (onStart) onStart();
  let stop = false;
  let inWindow = 0;
  let all = 0;
  const started = now();
  let stopped = started;
  const timer = setTimeout(() => {
    stop = true;
    stopped = now();
  }, seconds * 1000);
  try {
    await Promise.all(
      Array.from({ length: n }, async (_, w) => {
        while (!stop) {
          await step(w);
          ++all;
          if (!stop) ++inWindow;
        }
      }),
    );
  } finally {
    clearTimeout(timer);
    stop = true;
  }
  const joined = now();
  const after = await commandCalls(control);
  return { started, stopped, joined, window: (stopped - started) / 1000, inWindow, all, before, after };
}

// ---- scenarios -------------------------------------------------------------------------------

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function progress(msg) {
  process.stderr.write(`  ${msg}\n`);
}

async function uncontended(ctx) {
  const client = await newClient(ctx.url, true);
  const locker = ctx.peer.makeLocker(client, ctx.s);
  const key = `${KEY_PREFIX}uncontended`;
  const rtt = await pingRtt(client, Math.min(0.3, ctx.seconds / 10));
  const run = await runTimed(ctx.control, 1, ctx.seconds, async () => {
    const a = await locker.acquire(key);
    await locker.release(a.handle);
  });
  const rate = run.inWindow / run.window;
  const cmds = commandFigures(run.before, run.after, run.all);
  progress(`${ctx.label} uncontended ${rate.toFixed(0)} pairs/s`);
  ctx.result('uncontended', 'uncontended', 'pairs/s', rate, {
    pair_latency_us: rate > 0 ? 1e6 / rate : 0,
    commands_per_pair: cmds.perStep,
    ...renameExtra(cmds.extra, 'pair'),
    ping_rtt_us: rtt,
    round_trips_per_pair: rate > 0 && rtt > 0 ? 1e6 / rate / rtt : 0,
  });
}

function renameExtra(extra, unit) {
  const out = {};
  for (const [k, v] of Object.entries(extra)) out[k.replace(/_step$/, `_${unit}`)] = v;
  return out;
}

async function throughput(ctx) {
  for (const threads of ctx.threads) {
    const perWorker = ctx.throughputClients === 'per-worker';
    const lockers = [];
    if (perWorker) {
      for (let i = 0; i < threads; ++i) lockers.push(ctx.peer.makeLocker(await newClient(ctx.url, true), ctx.s));
    } else {
      const locker = ctx.peer.makeLocker(await newClient(ctx.url, true), ctx.s);
      for (let i = 0; i < threads; ++i) lockers.push(locker);
    }
    const run = await runTimed(ctx.control, threads, ctx.seconds, async (w) => {
      const a = await lockers[w].acquire(`${KEY_PREFIX}tp:${w}`);
      await lockers[w].release(a.handle);
    });
    await closeClientsExceptControl(ctx);
    const rate = run.inWindow / run.window;
    const cmds = commandFigures(run.before, run.after, run.all);
    progress(`${ctx.label} throughput ${threads} workers ${rate.toFixed(0)} pairs/s`);
    ctx.result('throughput', `throughput.threads=${threads}`, 'pairs/s', rate, {
      threads,
      clients: perWorker ? `one ioredis client per worker (${threads})` : 'one shared ioredis client',
      commands_per_pair: cmds.perStep,
      ...renameExtra(cmds.extra, 'pair'),
    });
  }
}

async function closeClientsExceptControl(ctx) {
  const keep = openClients.filter((c) => c === ctx.control);
  const drop = openClients.filter((c) => c !== ctx.control);
  openClients.splice(0, openClients.length, ...keep);
  await Promise.all(drop.map((c) => c.quit().catch(() => c.disconnect())));
}

async function handoff(ctx) {
  const variants = [];
  if (ctx.handoffClients !== 'shared') variants.push({ name: `${ctx.workers}-clients`, shared: false });
  if (ctx.handoffClients !== 'per-worker') variants.push({ name: 'shared-client', shared: true });
  const key = `${KEY_PREFIX}handoff`;
  for (const v of variants) {
    const lockers = [];
    let first;
    if (v.shared) {
      first = await newClient(ctx.url, true);
      const locker = ctx.peer.makeLocker(first, ctx.s);
      for (let i = 0; i < ctx.workers; ++i) lockers.push(locker);
    } else {
      for (let i = 0; i < ctx.workers; ++i) {
        const c = await newClient(ctx.url, true);
        if (!first) first = c;
        lockers.push(ctx.peer.makeLocker(c, ctx.s));
      }
    }
    // One round trip: the median PING latency through the same kind of ioredis client.
    const rtt = await pingRtt(first, Math.min(0.3, ctx.seconds / 10));
    let events = [];
    const run = await runTimed(
      ctx.control,
      ctx.workers,
      ctx.seconds,
      async (w) => {
        const called = now();
        const a = await lockers[w].acquire(key);
        const acquired = now();
        const releaseCalled = now();
        await lockers[w].release(a.handle);
        events.push({ acquired, releaseCalled, released: now(), w, attempts: a.attempts, waitMs: acquired - called });
      },
      () => {
        events = []; // drop the warm-up
      },
    );
    await closeClientsExceptControl(ctx);
    emitHandoff(ctx, v.name, run, events, rtt);
  }
}

// Same tally as dlock's (bench/lock_scenarios.cpp): sort acquisitions by the time acquire()
// returned; an acquisition inside the window counts; it is a hand-off when the previous
// acquisition was another worker's, and its latency is from that worker's release() returning.
function emitHandoff(ctx, variant, run, events, rtt) {
  events.sort((a, b) => a.acquired - b.acquired);
  let acquisitions = 0;
  let handoffs = 0;
  let negative = 0;
  const lat = [];
  const fromCall = [];
  for (let i = 0; i < events.length; ++i) {
    const e = events[i];
    if (e.acquired < run.started || e.acquired > run.stopped) continue;
    ++acquisitions;
    if (i === 0 || events[i - 1].w === e.w) continue;
    ++handoffs;
    const prev = events[i - 1];
    const us = (e.acquired - prev.released) * 1000;
    if (us < 0) ++negative;
    lat.push(us);
    fromCall.push((e.acquired - prev.releaseCalled) * 1000);
  }
  const win = run.window;
  const cmds = commandFigures(run.before, run.after, events.length);
  const p50 = percentile(lat, 50);
  const p99 = percentile(lat, 99);
  const attempts = events.map((e) => e.attempts).filter((x) => Number.isFinite(x));
  const waits = events.map((e) => e.waitMs);
  const overLimit = events.filter((e) => ctx.peer.overDefaultLimit(e)).length;
  const name = `handoff.${variant}`;
  const fair = fairness(events, run, ctx.workers);
  const common = {
    workers: ctx.workers,
    clients: variant === 'shared-client' ? 'one ioredis client shared by the workers' : 'one ioredis client per worker',
  };
  progress(`${ctx.label} handoff ${variant} ${(acquisitions / win).toFixed(0)} acquisitions/s ${(handoffs / win).toFixed(0)} hand-offs/s`);
  ctx.result('handoff', name, 'hand-offs/s', handoffs / win, { ...common, hand_offs: handoffs, window_s: win });
  ctx.result('handoff', name, 'acquisitions/s', acquisitions / win, {
    ...common,
    same_worker_reacquisitions: acquisitions ? (acquisitions - handoffs) / acquisitions : 0,
    ...fair,
  });
  ctx.result('handoff', name, 'commands/acquisition', cmds.perStep, {
    ...common,
    ...renameExtra(cmds.extra, 'acquisition'),
    acquisitions_counted: events.length,
    attempts_per_acquisition_mean: attempts.length ? attempts.reduce((a, b) => a + b, 0) / attempts.length : null,
    attempts_per_acquisition_max: attempts.length ? Math.max(...attempts) : null,
    acquire_wait_ms_max: waits.length ? waits.reduce((a, b) => Math.max(a, b), 0) : 0,
    acquire_wait_ms_p99: percentile(waits, 99),
    over_default_limit: overLimit,
    over_default_limit_note: ctx.peer.defaultLimitNote,
  });
  ctx.result('handoff', name, 'release->next p50 (round trips)', rtt > 0 ? p50 / rtt : 0, {
    ...common,
    p50_us: p50,
    round_trip_us: rtt,
    round_trip_note: 'median PING latency through an ioredis client, same run',
    negative_latencies: negative,
    p50_from_release_call_us: percentile(fromCall, 50),
  });
  ctx.result('handoff', name, 'release->next p50 (us)', p50, { ...common });
  ctx.result('handoff', name, 'release call->next p50 (us)', percentile(fromCall, 50), {
    ...common,
    note: "from release() being called to a different worker's acquire() returning",
  });
  ctx.result('handoff', name, 'release->next p99 (us)', p99, { ...common, p99_round_trips: rtt > 0 ? p99 / rtt : 0 });
}

// How the acquisitions in the window spread over the workers.
function fairness(events, run, workers) {
  const per = new Array(workers).fill(0);
  for (const e of events) if (e.acquired >= run.started && e.acquired <= run.stopped) per[e.w]++;
  const total = per.reduce((a, b) => a + b, 0);
  const sorted = [...per].sort((a, b) => b - a);
  return {
    workers_that_acquired: per.filter((x) => x > 0).length,
    top2_workers_share: total ? (sorted[0] + (sorted[1] || 0)) / total : 0,
  };
}

// ---- main ------------------------------------------------------------------------------------

const SCENARIOS = { uncontended, throughput, handoff };

async function main() {
  const o = parseArgs(process.argv.slice(2));
  redlockMasters = o.redlockMasters || [];
  let failures = 0;
  const control = await newClient(o.url, false);
  try {
    for (const scenario of o.scenarios) {
      for (const p of o.peers) {
        const peer = PEERS[p];
        for (const settings of o.settings) {
          const s = peer.settings[settings];
          const base = {
            peer: peer.name,
            peer_version: peer.version(),
            settings,
            settings_detail: peer.describe(s),
            scenario,
          };
          const ctx = {
            ...o,
            peer,
            s,
            control,
            label: `${peer.name}/${settings}`,
            result(sc, name, metric, value, extra) {
              emit({ ...base, scenario: sc, name, metric, value, ...extra });
            },
          };
          try {
            await deleteBenchKeys(control);
            await SCENARIOS[scenario](ctx);
          } catch (e) {
            ++failures;
            progress(`${ctx.label} ${scenario} failed: ${e && e.stack ? e.stack : e}`);
            emit({ ...base, error: String(e && e.message ? e.message : e) });
            await closeClientsExceptControl(ctx).catch(() => {});
          }
          await deleteBenchKeys(control).catch(() => {});
        }
      }
    }
  } finally {
    await closeClients();
  }
  return failures ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`node_peers: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
  },
);
