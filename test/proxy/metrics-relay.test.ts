/**
 * `/metrics` of a gateway with several workers sums every worker's values (metrics-relay.ts). A
 * worker too busy to answer in time (one reduction of a 29 MB request takes seconds) is counted
 * with what it shared last, so the gateway's counters never go down while every worker lives; CI
 * saw them drop by one worker's share during proxy-memory's 8 large requests. Real processes: a
 * node:cluster of two workers, one stopped with SIGSTOP, so nothing is timed.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SCRIPT = fileURLToPath(new URL('./support/relay-cluster.ts', import.meta.url));

describe('the metrics relay of a gateway with two workers', () => {
  it('counts a worker whose own read failed, or that does not answer in time, with the values it shared last', () => {
    const out = execFileSync(process.execPath, ['--import', 'tsx', SCRIPT], { encoding: 'utf8', timeout: 60_000 });
    expect(JSON.parse(out.trim())).toEqual({ both: 3, oneFailed: 3, oneBusy: 3 });
  });
});
