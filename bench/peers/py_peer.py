#!/usr/bin/python3
"""Peer driver for bench/peers/run: redis-py's Lock (Debian's python3-redis), measured in the same
scenarios and with the same metric names as dlock's own benchmark (bench/lock_scenarios.hpp):

  uncontended  one thread, one key, sequential acquire+release               -> pairs/s
  throughput   N threads, one key each, sharing one redis.Redis (its
               connection pool hands each concurrent thread a connection)    -> pairs/s
  handoff      W threads, one key, each loops acquire -> release at once,
               one redis.Redis per thread ("W-clients") and one shared
               redis.Redis ("shared-client")                                 -> hand-offs/s,
               acquisitions/s, commands/acquisition, release->next p50/p99

Settings: "default" = Lock(sleep=0.1) (the library's default), "aggressive" = sleep=0.001. In
both, acquire() blocks until it has the lock (blocking=True, blocking_timeout=None, both
defaults), and every lease is 30 s (timeout=30).

Prints one JSON object per line per result on stdout; progress goes to stderr.

  /usr/bin/python3 py_peer.py --url redis://127.0.0.1:6379 --seconds 3 \\
      [--settings default|aggressive|all] [--scenario uncontended,throughput,handoff] \\
      [--threads 1,4,16,64] [--workers 8] [--handoff-clients both|shared|per-worker]
"""

import argparse
import json
import sys
import threading
import time
import traceback

try:
    import redis
    from redis.connection import Connection
except ImportError:  # pragma: no cover - reported as a result by the caller
    sys.stderr.write("py_peer: cannot import redis (Debian: apt-get install python3-redis; "
                     "run with /usr/bin/python3)\n")
    sys.exit(69)

LEASE_S = 30
KEY_PREFIX = "dlock-bench:peer:"
SETTINGS = {
    "default": {"sleep": 0.1},
    "aggressive": {"sleep": 0.001},
}
SCENARIO_NAMES = ("uncontended", "throughput", "handoff")

# ---- client-side command counting ------------------------------------------------------------
# Every command the lock clients send passes through Connection.send_command (the control client
# uses a plain Connection and is not counted). Counters are per thread, summed when read.

_counters_lock = threading.Lock()
_counters = []
_local = threading.local()


def _count(name):
    d = getattr(_local, "d", None)
    if d is None:
        d = {}
        _local.d = d
        with _counters_lock:
            _counters.append(d)
    d[name] = d.get(name, 0) + 1


def sent_reset():
    with _counters_lock:
        for d in _counters:
            d.clear()


def sent_snapshot():
    total = {}
    with _counters_lock:
        for d in _counters:
            for k, v in list(d.items()):
                total[k] = total.get(k, 0) + v
    return total


class CountingConnection(Connection):
    def send_command(self, *args, **kwargs):
        if args:
            name = args[0]
            if isinstance(name, bytes):
                name = name.decode()
            _count(str(name).lower().replace(" ", "|"))
        return super().send_command(*args, **kwargs)


def lock_client(url):
    return redis.Redis.from_url(url, connection_class=CountingConnection)


# ---- redis helpers ---------------------------------------------------------------------------


def command_calls(control):
    """INFO commandstats -> {command: calls}."""
    info = control.info("commandstats")
    calls = {}
    for key, value in info.items():
        # redis-py parses "cmdstat_set:calls=1,..." into {"cmdstat_set": {"calls": 1, ...}}
        name = key[len("cmdstat_"):] if key.startswith("cmdstat_") else key
        if isinstance(value, dict) and "calls" in value:
            calls[name] = int(value["calls"])
    return calls


def delete_bench_keys(control):
    keys = list(control.scan_iter(match=KEY_PREFIX + "*", count=1000))
    for i in range(0, len(keys), 1000):
        control.delete(*keys[i:i + 1000])


def command_figures(before, after, steps, client_sent):
    """Commands per step from the commandstats delta, counting only the commands the lock
    clients sent (seen client-side): redis-py's release script runs GET and DEL, which its
    client never sends directly, so this is the number of client-issued commands."""
    delta = {}
    for k, v in after.items():
        d = v - before.get(k, 0)
        if d > 0:
            delta[k] = d
    delta.pop("info", None)  # the control connection's own INFO
    server = sum(v for k, v in delta.items() if k in client_sent)
    internal = sum(v for k, v in delta.items() if k not in client_sent)
    client = sum(client_sent.values())

    def per(x):
        return x / steps if steps > 0 else 0.0

    breakdown = " ".join(
        "%s=%.3f%s" % (k, per(v), "" if k in client_sent else "*")
        for k, v in sorted(delta.items(), key=lambda kv: -kv[1]))
    return per(server), {
        "client_counted_commands_per_step": per(client),
        "script_internal_calls_per_step": per(internal),
        "commandstats_per_step": breakdown + " (* = only run inside scripts)",
        "client_commands": ",".join(sorted(client_sent)),
    }


def rename_extra(extra, unit):
    return {(k[:-len("_step")] + "_" + unit if k.endswith("_step") else k): v
            for k, v in extra.items()}


# ---- timing ----------------------------------------------------------------------------------

now = time.perf_counter  # seconds, monotonic


def percentile(xs, p):
    if not xs:
        return 0.0
    v = sorted(xs)
    rank = p / 100.0 * (len(v) - 1)
    lo = int(rank)
    hi = min(len(v) - 1, lo + 1)
    return v[lo] + (v[hi] - v[lo]) * (rank - lo)


def ping_rtt_us(client, seconds):
    xs = []
    until = now() + seconds
    while True:
        t0 = now()
        client.ping()
        xs.append((now() - t0) * 1e6)
        if now() >= until:
            break
    return percentile(xs, 50)


class TimedRun:
    pass


def run_timed(control, n, seconds, step, on_start=None):
    """n threads call step(w) in a loop for `seconds`, after one warm-up step each. Counts the
    steps that completed inside the window [started, stopped]."""
    stop = threading.Event()
    ready = threading.Barrier(n + 1)
    go = threading.Event()
    failure = []
    in_window = [0] * n
    total = [0] * n

    def worker(w):
        try:
            step(w)
        except BaseException as e:  # noqa: BLE001 - reported below
            failure.append(e)
            stop.set()
        try:
            ready.wait()
        except threading.BrokenBarrierError:
            return
        go.wait()
        try:
            while not stop.is_set():
                step(w)
                total[w] += 1
                if not stop.is_set():
                    in_window[w] += 1
        except BaseException as e:  # noqa: BLE001
            failure.append(e)
            stop.set()

    threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(n)]
    for t in threads:
        t.start()
    ready.wait()
    r = TimedRun()
    r.before = command_calls(control)
    sent_reset()
    if on_start:
        on_start()
    r.started = now()
    go.set()
    stop.wait(seconds)
    stop.set()
    r.stopped = now()
    for t in threads:
        t.join()
    r.joined = now()
    r.after = command_calls(control)
    r.sent = sent_snapshot()
    if failure:
        raise failure[0]
    r.window = r.stopped - r.started
    r.in_window = sum(in_window)
    r.all = sum(total)
    return r


# ---- scenarios -------------------------------------------------------------------------------


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def progress(msg):
    sys.stderr.write("  %s\n" % msg)
    sys.stderr.flush()


def pair(client, key, sleep):
    lock = client.lock(key, timeout=LEASE_S, sleep=sleep)
    if not lock.acquire():
        raise RuntimeError("acquire() returned False")
    lock.release()


def uncontended(ctx):
    client = lock_client(ctx.url)
    try:
        key = KEY_PREFIX + "uncontended"
        rtt = ping_rtt_us(client, min(0.3, ctx.seconds / 10))
        run = run_timed(ctx.control, 1, ctx.seconds, lambda w: pair(client, key, ctx.sleep))
    finally:
        client.close()
    rate = run.in_window / run.window
    per, extra = command_figures(run.before, run.after, run.all, run.sent)
    progress("%s uncontended %.0f pairs/s" % (ctx.label, rate))
    ctx.result("uncontended", "uncontended", "pairs/s", rate, dict(
        pair_latency_us=1e6 / rate if rate > 0 else 0,
        commands_per_pair=per,
        **rename_extra(extra, "pair"),
        ping_rtt_us=rtt,
        round_trips_per_pair=(1e6 / rate / rtt) if rate > 0 and rtt > 0 else 0,
    ))


def throughput(ctx):
    for threads in ctx.threads:
        client = lock_client(ctx.url)
        try:
            run = run_timed(ctx.control, threads, ctx.seconds,
                            lambda w: pair(client, "%stp:%d" % (KEY_PREFIX, w), ctx.sleep))
        finally:
            client.close()
        rate = run.in_window / run.window
        per, extra = command_figures(run.before, run.after, run.all, run.sent)
        progress("%s throughput %d threads %.0f pairs/s" % (ctx.label, threads, rate))
        ctx.result("throughput", "throughput.threads=%d" % threads, "pairs/s", rate, dict(
            threads=threads,
            clients="one shared redis.Redis (connection pool: one connection per busy thread)",
            commands_per_pair=per,
            **rename_extra(extra, "pair"),
        ))


def fairness(events, run, workers):
    per = [0] * workers
    for e in events:
        if run.started <= e[0] <= run.stopped:
            per[e[3]] += 1
    total = sum(per)
    s = sorted(per, reverse=True)
    return {
        "workers_that_acquired": sum(1 for x in per if x > 0),
        "top2_workers_share": (s[0] + (s[1] if len(s) > 1 else 0)) / total if total else 0,
    }


def handoff(ctx):
    variants = []
    if ctx.handoff_clients != "shared":
        variants.append(("%d-clients" % ctx.workers, False))
    if ctx.handoff_clients != "per-worker":
        variants.append(("shared-client", True))
    key = KEY_PREFIX + "handoff"
    for variant, shared in variants:
        if shared:
            clients = [lock_client(ctx.url)] * ctx.workers
        else:
            clients = [lock_client(ctx.url) for _ in range(ctx.workers)]
        logs = [[] for _ in range(ctx.workers)]

        def step(w):
            called = now()
            lock = clients[w].lock(key, timeout=LEASE_S, sleep=ctx.sleep)
            if not lock.acquire():
                raise RuntimeError("acquire() returned False")
            acquired = now()
            release_called = now()
            lock.release()
            # (acquired, release_called, released, worker, wait)
            logs[w].append((acquired, release_called, now(), w, acquired - called))

        def clear_logs():
            for log in logs:
                log.clear()  # drop the warm-up

        try:
            rtt = ping_rtt_us(clients[0], min(0.3, ctx.seconds / 10))
            run = run_timed(ctx.control, ctx.workers, ctx.seconds, step, clear_logs)
        finally:
            for c in {id(c): c for c in clients}.values():
                c.close()
        events = [e for log in logs for e in log]
        emit_handoff(ctx, variant, shared, run, events, rtt)


def emit_handoff(ctx, variant, shared, run, events, rtt):
    """Same tally as dlock's (bench/lock_scenarios.cpp): acquisitions sorted by the time
    acquire() returned; one inside the window counts; it is a hand-off when the previous one was
    another worker's, and its latency runs from that worker's release() returning."""
    events.sort(key=lambda e: e[0])
    acquisitions = handoffs = negative = 0
    lat, from_call = [], []
    for i, e in enumerate(events):
        if e[0] < run.started or e[0] > run.stopped:
            continue
        acquisitions += 1
        if i == 0 or events[i - 1][3] == e[3]:
            continue
        handoffs += 1
        prev = events[i - 1]
        us = (e[0] - prev[2]) * 1e6
        if us < 0:
            negative += 1
        lat.append(us)
        from_call.append((e[0] - prev[1]) * 1e6)
    win = run.window
    per, extra = command_figures(run.before, run.after, len(events), run.sent)
    p50, p99 = percentile(lat, 50), percentile(lat, 99)
    waits_ms = [e[4] * 1e3 for e in events]
    name = "handoff." + variant
    common = {
        "workers": ctx.workers,
        "clients": ("one redis.Redis shared by the threads (its pool: one connection per busy "
                    "thread)" if shared else "one redis.Redis per thread"),
    }
    progress("%s handoff %s %.0f acquisitions/s %.0f hand-offs/s"
             % (ctx.label, variant, acquisitions / win, handoffs / win))
    ctx.result("handoff", name, "hand-offs/s", handoffs / win,
               dict(common, hand_offs=handoffs, window_s=win))
    ctx.result("handoff", name, "acquisitions/s", acquisitions / win, dict(
        common,
        same_worker_reacquisitions=(acquisitions - handoffs) / acquisitions if acquisitions else 0,
        **fairness(events, run, ctx.workers)))
    ctx.result("handoff", name, "commands/acquisition", per, dict(
        common,
        **rename_extra(extra, "acquisition"),
        acquisitions_counted=len(events),
        acquire_wait_ms_max=max(waits_ms) if waits_ms else 0,
        acquire_wait_ms_p99=percentile(waits_ms, 99),
        over_default_limit=0,
        over_default_limit_note="none: the default blocking_timeout (None) waits forever"))
    ctx.result("handoff", name, "release->next p50 (round trips)", p50 / rtt if rtt > 0 else 0,
               dict(common, p50_us=p50, round_trip_us=rtt,
                    round_trip_note="median PING latency through a redis.Redis, same run",
                    negative_latencies=negative,
                    p50_from_release_call_us=percentile(from_call, 50)))
    ctx.result("handoff", name, "release->next p50 (us)", p50, dict(common))
    ctx.result("handoff", name, "release call->next p50 (us)", percentile(from_call, 50),
               dict(common, note="from release() being called to a different worker's "
                                 "acquire() returning"))
    ctx.result("handoff", name, "release->next p99 (us)", p99,
               dict(common, p99_round_trips=p99 / rtt if rtt > 0 else 0))


SCENARIOS = {"uncontended": uncontended, "throughput": throughput, "handoff": handoff}


# ---- main ------------------------------------------------------------------------------------


def csv(kind):
    def parse(text):
        items = [x.strip() for x in text.split(",") if x.strip()]
        return [kind(x) for x in items]
    return parse


def main(argv):
    ap = argparse.ArgumentParser(description="redis-py Lock in dlock's lock benchmark scenarios")
    ap.add_argument("--url", default="redis://127.0.0.1:6379")
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--settings", default="all", help="default, aggressive or all")
    ap.add_argument("--scenario", "--scenarios", dest="scenario", default="all",
                    help="comma-separated: uncontended,throughput,handoff (or all)")
    ap.add_argument("--threads", type=csv(int), default=[1, 4, 16, 64])
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--handoff-clients", choices=["both", "shared", "per-worker"], default="both")
    o = ap.parse_args(argv)
    if o.seconds <= 0:
        ap.error("--seconds must be positive")
    if o.workers < 2:
        ap.error("--workers must be at least 2")
    settings = list(SETTINGS) if o.settings == "all" else csv(str)(o.settings)
    scenarios = list(SCENARIO_NAMES) if o.scenario == "all" else csv(str)(o.scenario)
    for s in settings:
        if s not in SETTINGS:
            ap.error("unknown settings %s" % s)
    for s in scenarios:
        if s not in SCENARIOS:
            ap.error("unknown scenario %s" % s)

    control = redis.Redis.from_url(o.url)
    failures = 0
    try:
        for scenario in scenarios:
            for settings_name in settings:
                sleep = SETTINGS[settings_name]["sleep"]
                base = {
                    "peer": "redis-py",
                    "peer_version": "redis-py %s (Debian python3-redis, Python %s)"
                                    % (redis.__version__, sys.version.split()[0]),
                    "settings": settings_name,
                    "settings_detail": ("Redis.lock(key, timeout=%d, sleep=%g) per acquisition, "
                                        "acquire() blocking=True blocking_timeout=None; "
                                        "acquire = SET NX PX, release = compare-and-delete "
                                        "EVALSHA" % (LEASE_S, sleep)),
                    "scenario": scenario,
                }

                class Ctx:
                    pass

                ctx = Ctx()
                ctx.url, ctx.seconds, ctx.threads, ctx.workers = o.url, o.seconds, o.threads, o.workers
                ctx.handoff_clients, ctx.sleep, ctx.control = o.handoff_clients, sleep, control
                ctx.label = "redis-py/" + settings_name

                def result(sc, name, metric, value, extra, base=base):
                    emit(dict(base, scenario=sc, name=name, metric=metric, value=value, **extra))

                ctx.result = result
                try:
                    delete_bench_keys(control)
                    SCENARIOS[scenario](ctx)
                except Exception as e:  # noqa: BLE001 - one failure must not end the run
                    failures += 1
                    progress("%s %s failed: %s" % (ctx.label, scenario, traceback.format_exc()))
                    emit(dict(base, error="%s: %s" % (type(e).__name__, e)))
                try:
                    delete_bench_keys(control)
                except Exception:  # noqa: BLE001
                    pass
    finally:
        control.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
