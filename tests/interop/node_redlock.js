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
  // node-redlock polls: retries after retryDelay ± retryJitter until retryCount runs out.
  const patient = new Redlock(clients, { retryCount: -1, retryDelay: 10, retryJitter: 10 });
  const once = new Redlock(clients, { retryCount: 0 });
  for (const r of [patient, once]) r.on('error', () => {});

  if (mode === 'count') {
    const [dataUrl, counter, n] = rest;
    const data = new Redis(dataUrl);
    for (let i = 0; i < Number(n); ++i) {
      const lock = await patient.acquire([name], LEASE_MS);
      const value = await data.get(counter);
      await data.set(counter, String((value === null ? 0 : Number(value)) + 1));
      await lock.release();
    }
    say('done');
    await quit([data]);
  } else if (mode === 'hold') {
    const lock = await patient.acquire([name], LEASE_MS);
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
