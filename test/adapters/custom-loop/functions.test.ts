import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import {
  outputCapField,
  prepareRequest,
  readOutputCap,
  reduceToolResult,
  withOutputCap,
} from '../../../adapters/shared/functions.js';
import { handleRecoveryCall, recoveryArgs, recoveryToolDefinition } from '../../../adapters/shared/recovery.js';
import { createFakeTerminator } from '../support/fake-terminator.js';

const capValue = fc.option(fc.integer({ min: -5, max: 100_000 }), { nil: undefined });

describe('output cap helpers', () => {
  test.prop([capValue, capValue, capValue, capValue, capValue], { numRuns: 200 })(
    'reads the smallest positive cap of the three aliases, top level and in extra_body',
    (a, b, c, xa, xc) => {
      const extra = {
        ...(xa === undefined ? {} : { max_tokens: xa }),
        ...(xc === undefined ? {} : { max_output_tokens: xc }),
      };
      const request = {
        ...(a === undefined ? {} : { max_tokens: a }),
        ...(b === undefined ? {} : { max_completion_tokens: b }),
        ...(c === undefined ? {} : { max_output_tokens: c }),
        ...(Object.keys(extra).length > 0 ? { extra_body: extra } : {}),
      };
      const positives = [a, b, c, xa, xc].filter((v): v is number => v !== undefined && v > 0);
      expect(readOutputCap(request)).toBe(positives.length === 0 ? undefined : Math.min(...positives));
    },
  );

  test.prop(
    [
      fc.dictionary(fc.constantFrom('max_tokens', 'max_completion_tokens', 'max_output_tokens', 'top_k'), fc.nat()),
      fc.integer({ min: 1, max: 1e6 }),
    ],
    { numRuns: 100 },
  )(
    'a cap written over a request with extra_body aliases leaves no alias behind and keeps the other extra_body members',
    (extra, cap) => {
      const request = Object.freeze({ model: 'm', extra_body: Object.freeze({ ...extra }) });
      const out = withOutputCap(request, outputCapField(request, 'max_completion_tokens'), cap);
      expect(readOutputCap(out)).toBe(cap);
      const outExtra = (out['extra_body'] ?? {}) as Record<string, unknown>;
      expect(['max_tokens', 'max_completion_tokens', 'max_output_tokens'].filter((f) => f in outExtra)).toEqual([]);
      if ('top_k' in extra) expect(outExtra['top_k']).toBe(extra['top_k']);
      expect(request.extra_body).toEqual(extra);
    },
  );

  test.prop(
    [
      fc.dictionary(fc.constantFrom('max_tokens', 'max_completion_tokens', 'max_output_tokens', 'model'), fc.nat()),
      fc.integer({ min: 1, max: 1e6 }),
    ],
    { numRuns: 100 },
  )('writes exactly one cap field and never mutates the input', (request, cap) => {
    const frozen = Object.freeze({ ...request });
    const field = outputCapField(frozen, 'max_output_tokens');
    const out = withOutputCap(frozen, field, cap);
    expect(out[field]).toBe(cap);
    expect(['max_tokens', 'max_completion_tokens', 'max_output_tokens'].filter((f) => f in out)).toEqual([field]);
    expect(frozen).toEqual(request);
  });
});

describe('function API fail-open', () => {
  it('returns the original tool content when the pipeline rejects', async () => {
    const reduced = await reduceToolResult(
      createFakeTerminator({ fail: true }),
      { callId: 'c', name: 'grep', args: {}, content: 'x'.repeat(9000) },
      { sessionId: 's' },
    );
    expect(reduced).toMatchObject({ content: 'x'.repeat(9000), changed: false });
    expect(reduced.decisions[0]).toMatchObject({ kind: 'failed_open', error: 'Error' });
  });

  it('returns the caller request object itself when the pipeline rejects', async () => {
    const request = { model: 'm', messages: [] };
    const prepared = await prepareRequest(createFakeTerminator({ fail: true }), request, { sessionId: 's' });
    expect(prepared.request).toBe(request);
    expect(prepared.changed).toBe(false);
  });
});

describe('recovery tool', () => {
  const terminator = createFakeTerminator();
  it('drops a model-supplied session id and undeclared keys', () => {
    expect(recoveryArgs(terminator.recoveryTool, '{"action":"status","session_id":"spoofed","evil":1}')).toEqual({
      action: 'status',
    });
    expect(recoveryArgs(terminator.recoveryTool, 'not json')).toEqual({});
  });

  it('answers with the host session, not the one the model sent', async () => {
    const out = JSON.parse(
      await handleRecoveryCall(terminator, { action: 'status', session_id: 'spoofed' }, 'host-session'),
    ) as { session: string };
    expect(out.session).toBe('host-session');
  });

  it('never throws: an internal failure becomes a JSON error result', async () => {
    const broken = {
      ...terminator,
      recoveryTool: { ...terminator.recoveryTool, handle: () => Promise.reject(new TypeError('boom')) },
    };
    expect(JSON.parse(await handleRecoveryCall(broken, {}, 's'))).toEqual({
      error: 'recovery failed',
      error_type: 'TypeError',
    });
  });

  it('describes itself in the three wire formats without additionalProperties: false', () => {
    expect(recoveryToolDefinition(terminator, 'chat')).toMatchObject({
      type: 'function',
      function: { name: 'token_terminator' },
    });
    expect(recoveryToolDefinition(terminator, 'responses')).toMatchObject({
      type: 'function',
      name: 'token_terminator',
      strict: false,
    });
    const anthropic = recoveryToolDefinition(terminator, 'anthropic') as { input_schema: Record<string, unknown> };
    expect(anthropic.input_schema['additionalProperties']).toBeUndefined();
  });
});
