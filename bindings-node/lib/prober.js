'use strict';
// The probe loop a pool runs with `recovery: 'probe'` and a `probe`.

const { invalidArg, num, uint } = require('./checks');

/**
 * Rounds of the host's probe loop: probe leases on the cells due, the
 * user's `probe({ kind, value, context })` on each (true/undefined
 * healthy, false failed, a number an HTTP status; a throw is a failure),
 * the verdicts back to the host. One round at a time.
 *
 * @param {import('../repute.node').NativePool} native
 * @param {Record<string, any>} o the pool's options
 * @param {string | undefined} recovery
 * @param {() => void} changed the pool's notice that a round may have freed permits
 * @returns {NodeJS.Timeout | undefined} the loop's timer, none without a `probe`
 */
function startProber(native, o, recovery, changed) {
  if (o.probe === undefined || o.probe === null) return;
  if (typeof o.probe !== 'function') throw invalidArg('probe', 'must be a function');
  if (recovery !== 'probe') throw invalidArg('probe', "goes with recovery: 'probe'");
  const concurrency = o.probeConcurrency === undefined ? 4 : uint('probeConcurrency', o.probeConcurrency);
  if (concurrency === 0) throw invalidArg('probeConcurrency', 'must be >= 1');
  const every = o.probeEveryMs === undefined ? 1000 : num('probeEveryMs', o.probeEveryMs);
  if (!(every > 0)) throw invalidArg('probeEveryMs', 'must be > 0');
  const probe = o.probe;
  let running = false;
  const round = async () => {
    if (running) return;
    running = true;
    try {
      const leases = native.probeStart(concurrency);
      await Promise.all(
        leases.map(async (l) => {
          const started = performance.now();
          let answer;
          try {
            answer = await probe({ kind: l.kind, value: l.value, context: l.context });
          } catch {
            answer = false;
          }
          const status = typeof answer === 'number' ? answer : undefined;
          const healthy = answer === undefined || answer === null || answer === true;
          native.probeFinish(l.id, healthy, status, performance.now() - started);
        }),
      );
      changed();
    } catch {
      // A closed pool or a failed store: the next round tries again.
    } finally {
      running = false;
    }
  };
  return setInterval(round, every).unref();
}

module.exports = { startProber };
