// node-redlock (npm `redlock`, one ioredis client per master) on the same masters as dlock's
// RedLock, for the interop tests in tests/integration/redlock_test.cpp. Uses the packages that
// bench/peers/install puts in bench/peers/node_modules. One line per event on stdout.
//
//   node node_redlock.js count MASTERS NAME DATA_URL COUNTER N
//       N critical sections under node-redlock: GET COUNTER, then SET COUNTER+1 on DATA_URL's
//       server (not atomic: only the lock keeps the count exact); prints "done"
//   node node_redlock.js hold MASTERS NAME
//       acquires, prints "acquired", holds until SIGTERM, releases, prints "released"
//   node node_redlock.js try MASTERS NAME
//       one attempt, no retries: prints "acquired" (and releases) or "busy"
//
// MASTERS is a comma-separated list of redis:// URLs.
'use strict';
const path = require('path');
const modules = path.join(__dirname, '..', '..', 'bench', 'peers', 'node_modules');
const Redis = require(path.join(modules, 'ioredis'));
const redlockModule = require(path.join(modules, 'redlock'));
const Redlock = redlockModule.default || redlockModule.Redlock || redlockModule;

const LEASE_MS = 10000;

function say(line) {
  process.stdout.write(line + '\n');
}

async function main() {
  const [mode, masters, name, ...rest] = process.argv.slice(2);
  if (!mode || !masters || !name) {
    process.stderr.write('usage: see the comment at the top of node_redlock.js\n');
    process.exit(64);
  }
  const clients = masters.split(',').map((url) => new Redis(url, { maxRetriesPerRequest: 1 }));
  const quit = async (extra) => {
    for (const c of clients.concat(extra || [])) c.disconnect();
  };
  const once = new Redlock(clients, { retryCount: 0 });
  once.on('error', () => {});
  // node-redlock polls. Its own retries (retryCount > 0) are not used: 5.0.0-beta.2 keeps the
  // keys a failed attempt set on a minority of masters while it retries, and its acquire script
  // refuses a key that exists, its own included. Against a contender those leftovers, set at
  // different moments, can keep a majority from ever being free at once until the run times out
  // (seen here: node-redlock holding keys on all five masters and never acquiring). A failed
  // single-attempt acquire() removes its partial keys before it throws, so the loop retries
  // with a clean slate, 10 ms ± 10 apart.
  const acquire = async (resource) => {
    for (;;) {
      try {
        return await once.acquire([resource], LEASE_MS);
      } catch (e) {
        await new Promise((resolve) => setTimeout(resolve, Math.floor(Math.random() * 20)));
      }
    }
  };

  if (mode === 'count') {
    const [dataUrl, counter, n] = rest;
    const data = new Redis(dataUrl);
    for (let i = 0; i < Number(n); ++i) {
      const lock = await acquire(name);
      const value = await data.get(counter);
      await data.set(counter, String((value === null ? 0 : Number(value)) + 1));
      await lock.release();
    }
    say('done');
    await quit([data]);
  } else if (mode === 'hold') {
    const lock = await acquire(name);
    // The handler goes in before the line that lets the parent send the signal.
    const terminated = new Promise((resolve) => process.on('SIGTERM', resolve));
    say('acquired ' + lock.value);
    await terminated;
    await lock.release();
    say('released');
    await quit();
  } else if (mode === 'try') {
    try {
      const lock = await once.acquire([name], LEASE_MS);
      say('acquired ' + lock.value);
      await lock.release();
    } catch (e) {
      say('busy');
    }
    await quit();
  } else {
    process.stderr.write('unknown mode ' + mode + '\n');
    process.exit(64);
  }
}

main().catch((e) => {
  say('error ' + (e && e.message ? e.message : String(e)));
  process.exit(1);
});
