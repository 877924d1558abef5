/**
 * One handled API request (Chat Completions, Responses, Anthropic Messages): HTTP body → our
 * request type → the pipeline → upstream → the client, with the recovery loop when the proxy
 * offered the recovery tool. All reduction happens in the runtime's pipelines; this file only
 * translates and decides what to forward.
 *
 * Fail-open ladder: a body over the size limit streams through unread; a body that is not a JSON
 * object goes as the client sent it (the upstream answers it); any failure while preparing goes
 * as the client sent it; a request the pipeline left unchanged goes as the client's own bytes.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { PassThrough, type Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { ResponseAlias } from '../../src/recovery/exchanges.js';
import { listKey, type RecoveryCall, type RecoveryWireFormat } from '../../src/recovery/formats.js';
import { isObj } from '../../src/model/read.js';
import { definedFields } from '../../src/options.js';
import type { Prepared } from '../../src/runtime/types.js';
import { refusedForCapacity } from '../../src/session/tool-outputs.js';
import { runRecoveryLoop } from '../../src/recovery/loop.js';
import { errorLabel, type Decision, type ProviderRequest } from '../../src/step.js';
import { WIRE } from '../shared/wire.js';
import type { Reservation } from './bounds.js';
import type { ProxyContext } from './context.js';
import { serializeRequest } from './serialize.js';
import { clientWindow, SESSION_HEADER, sessionOf, tenantOf } from './request-identity.js';
import { relayRecoveryStream } from './stream-relay.js';
import {
  answerUpstreamFailure,
  readAll,
  relayResponse,
  requestHeaders,
  responseHeaders,
  sendUpstream,
} from './upstream.js';

type Obj = Record<string, unknown>;

type Body =
  | { readonly kind: 'full'; readonly buf: Buffer }
  | { readonly kind: 'over'; readonly stream: Readable; readonly memory: boolean };

/**
 * Read the body up to `limit` bytes, each chunk claimed from `reservation` (a body of a declared
 * length is claimed whole before it is read); past the limit or a refused claim, the read part and
 * the rest continue as one stream, never buffered whole.
 * Event listeners, not an async iterator: leaving a `for await` early would destroy the request.
 */
function readBody(req: IncomingMessage, limit: number, reservation: Reservation | undefined): Promise<Body> {
  const declared = Number(req.headers['content-length']);
  const known = req.headers['content-length'] !== undefined && Number.isFinite(declared);
  if (known && declared > limit) return Promise.resolve({ kind: 'over', stream: req, memory: false });
  if (known && reservation !== undefined && !reservation.take(declared))
    return Promise.resolve({ kind: 'over', stream: req, memory: true });
  const claim = known || reservation === undefined ? undefined : reservation;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
    };
    const onData = (chunk: Buffer): void => {
      chunks.push(chunk);
      size += chunk.length;
      const fits = size <= limit;
      if (fits && (claim === undefined || claim.take(chunk.length))) return;
      stop();
      req.pause();
      const rest = new PassThrough();
      for (const c of chunks) rest.write(c);
      req.pipe(rest);
      resolve({ kind: 'over', stream: rest, memory: fits });
    };
    const onEnd = (): void => {
      stop();
      resolve({ kind: 'full', buf: Buffer.concat(chunks, size) });
    };
    const onError = (error: Error): void => {
      stop();
      reject(error);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}

/**
 * The body's JSON value, its conversation items reused from the session's previous body where the
 * bytes are the same (body.ts), with the session id and request digest found on the way; a body
 * the memo cannot read is parsed plainly (its session is then found in `prepare`).
 */
function parseBody(
  ctx: ProxyContext,
  raw: Buffer,
  format: RecoveryWireFormat,
  req: IncomingMessage,
): { value: unknown; reused?: number; known?: { sessionId: string; digest: string } } | undefined {
  try {
    const tenant = tenantOf(req.headers);
    const group = `${format}\u0000${tenant}\u0000${String(req.headers[SESSION_HEADER] ?? '')}`;
    const out = ctx.bodies.parse(raw, listKey(format), group, (value) => sessionOf(req.headers, value, format, tenant));
    return out === undefined
      ? undefined
      : { value: out.value, reused: out.reused, known: { sessionId: out.sessionId, digest: out.digest } };
  } catch {
    try {
      return { value: JSON.parse(raw.toString('utf8')) as unknown };
    } catch {
      return undefined;
    }
  }
}

/** The request's context (the endpoint decided its format) and what the host path made of it. */
async function prepare(
  ctx: ProxyContext,
  client: Obj,
  raw: Buffer,
  format: RecoveryWireFormat,
  req: IncomingMessage,
  known?: { sessionId: string; digest: string },
  signal?: AbortSignal,
): Promise<Prepared> {
  const tenant = tenantOf(req.headers);
  const sessionId = known?.sessionId ?? sessionOf(req.headers, client, format, tenant);
  const digest = known?.digest ?? createHash('sha256').update(sessionId).update(raw).digest('hex');
  const model = typeof client['model'] === 'string' ? client['model'] : undefined;
  const window = clientWindow(req.headers);
  const single = format !== 'chat' || client['n'] === undefined || client['n'] === 1;
  const prepared = await ctx.terminator.prepare({
    request: client,
    // The recovery exchanges are the tenant's own: stored under its tenant and session, never the session alone.
    context: {
      sessionId,
      tenant,
      requestId: `p_${digest.slice(0, 32)}`,
      format,
      route: { ...WIRE[format].route, ...definedFields({ model, compressionThreshold: window }) },
    },
    signal,
    offer: ctx.recoveryRounds > 0 && single,
    shared: true,
    // Accounted once answered (ctx.account), with the recovery tool and rounds it sent.
    record: false,
  });
  countFailedOpen(ctx, prepared.failedOpen);
  countFailedOpen(ctx, prepared.decisions);
  return prepared;
}

/** A part of a request's handling failed open: counted and logged. */
function failedOpen(ctx: ProxyContext, format: RecoveryWireFormat, stage: string, error: unknown): void {
  ctx.metrics.failOpen.inc({ reason: stage });
  ctx.log({ level: 'warn', event: 'fail_open', api: format, stage, error: errorLabel(error) });
}

/**
 * Count the stages that failed open in a request (their content passed as sent). A full vault
 * (E_VAULT_CAPACITY) is logged the first time: from then on every new output passes as sent until
 * sessions end or expire, which only the operator can change.
 */
function countFailedOpen(ctx: ProxyContext, decisions: readonly Decision[]): void {
  for (const d of decisions) {
    if (d.kind !== 'failed_open') continue;
    const error = d.error ?? 'unknown';
    ctx.metrics.stageFailOpen.inc({ stage: d.stage, error });
    if (refusedForCapacity(d))
      ctx.logOnce({
        level: 'warn',
        event: 'vault_full',
        stage: d.stage,
        hint:
          'the vault is full of evidence that live sessions hold: new tool outputs pass as sent until sessions ' +
          'end or expire; raise TOKEN_TERMINATOR_VAULT_MAX_BYTES or lower TOKEN_TERMINATOR_SESSION_TTL_SECONDS ' +
          '(token_terminator_proxy_stage_fail_open_total counts each refusal)',
      });
  }
}

/** How one client request reaches the upstream: `send` a body, `forward` one and relay the answer, answer a `failed` send. */
export interface Upstream {
  /** Sends a body with the request's headers, aborted when the client goes away, timed under its `api`. */
  send(body: Buffer | Readable | null, changed: boolean, identity?: boolean): Promise<Dispatcher.ResponseData>;
  forward(body: Buffer | Readable | null, changed: boolean): Promise<void>;
  failed(error: unknown): void;
}

/** The upstream of one client request to `base` (its method and `pathAndQuery`); `api` labels its timing. */
export function upstreamFor(
  ctx: ProxyContext,
  req: IncomingMessage,
  res: ServerResponse,
  base: string,
  pathAndQuery: string,
  api: string,
): Upstream {
  const abort = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) abort.abort();
  });
  const failed = (error: unknown): void => answerUpstreamFailure(error, res, base, ctx.log);
  const send: Upstream['send'] = async (body, changed, identity = false) => {
    const started = performance.now();
    const response = await sendUpstream(ctx.dispatcher, {
      base,
      pathAndQuery,
      method: req.method ?? 'POST',
      headers: requestHeaders(req.headers, { bodyChanged: changed, identity }),
      body,
      signal: abort.signal,
      onRetry: (code) => {
        ctx.metrics.upstreamRetries.inc({ api });
        ctx.log({ level: 'info', event: 'upstream_retried', api, code });
      },
    });
    ctx.metrics.upstreamSeconds.observe({ api }, (performance.now() - started) / 1000);
    return response;
  };
  const forward: Upstream['forward'] = async (body, changed) => {
    let response: Dispatcher.ResponseData;
    try {
      response = await send(body, changed);
    } catch (error) {
      return failed(error);
    }
    await relayResponse(response, res);
  };
  return { send, forward, failed };
}

/** Response header naming why a request went to the upstream as the client sent it (`memory`). */
export const UNREDUCED_HEADER = 'x-token-terminator-unreduced';

/**
 * Handle one POST to a handled API path. Never throws. `reservation`: its claim on the process's
 * memory for reductions (bounds.ts); a body it cannot claim, or whose reduction it aborts, goes to
 * the upstream as sent, with {@link UNREDUCED_HEADER} on the answer.
 */
export async function handleApi(
  ctx: ProxyContext,
  req: IncomingMessage,
  res: ServerResponse,
  format: RecoveryWireFormat,
  pathAndQuery: string,
  started = performance.now(),
  reservation?: Reservation,
): Promise<void> {
  const base = format === 'anthropic' ? ctx.config.anthropicUpstream : ctx.config.upstream;
  const upstream = upstreamFor(ctx, req, res, base, pathAndQuery, format);
  /** The request goes to the upstream as the client sent it (nothing of it reduced), counted under `outcome`. */
  const pass = (outcome: string, body: Buffer | Readable): Promise<void> => {
    reservation?.release();
    ctx.metrics.requests.inc({ api: format, outcome });
    return upstream.forward(body, false);
  };
  /** A part failed: the request goes on as the client sent it. */
  const passOn = (raw: Buffer, stage: string, error: unknown): Promise<void> => {
    failedOpen(ctx, format, stage, error);
    return pass('fail_open', raw);
  };
  const unreduced = (outcome: 'no_memory' | 'memory_aborted', body: Buffer | Readable): Promise<void> => {
    ctx.log({ level: 'warn', event: 'unreduced', api: format, reason: outcome });
    res.setHeader(UNREDUCED_HEADER, 'memory');
    return pass(outcome, body);
  };

  let body: Body;
  try {
    body = await readBody(req, ctx.config.maxBodyBytes, reservation);
  } catch {
    res.destroy();
    return;
  }
  if (body.kind === 'over') {
    return body.memory ? unreduced('no_memory', body.stream) : pass('too_large', body.stream);
  }
  const raw = body.buf;
  const parsed = parseBody(ctx, raw, format, req);
  if (parsed?.reused) ctx.metrics.reusedItems.inc({ api: format }, parsed.reused);
  const client: unknown = parsed?.value;
  if (!isObj(client)) return pass('malformed', raw);
  let prepared: Prepared;
  try {
    await ctx.room();
    prepared = await prepare(ctx, client, raw, format, req, parsed?.known, reservation?.signal);
  } catch (error) {
    return passOn(raw, 'prepare', error);
  }
  if (reservation?.signal.aborted === true) return unreduced('memory_aborted', raw);
  let sentBody: Buffer;
  try {
    sentBody = prepared.changed ? serializeRequest(prepared.request, listKey(format), ctx.itemJson) : raw;
  } catch (error) {
    // A value the serializer cannot write (nested deeper than its stack, say).
    return passOn(raw, 'serialize', error);
  }
  ctx.metrics.requests.inc({ api: format, outcome: prepared.changed ? 'reduced' : 'unchanged' });
  // The reduction is over: what stays (the bodies, until answered and accounted) is bounded apart.
  reservation?.release();
  // The continuation requests of its recovery rounds, and their bytes, for its accounting.
  const continuations: ProviderRequest[] = [];
  let continuationBytes = 0;
  const sendRound = (b: Buffer, request: ProviderRequest): Promise<Dispatcher.ResponseData> => {
    continuations.push(request);
    continuationBytes += b.length;
    return upstream.send(b, true, true);
  };
  // Its log line comes with its figures, from the accounting (the server logs no other for it).
  ctx.accounted.add(res);
  try {
    if (!prepared.offered) await upstream.forward(sentBody, prepared.changed);
    else {
      // Offered the recovery tool: the loop runs, whole or streamed.
      const d: Delivery = { ctx, res, format, prepared, sentBody, sendRound, upstream };
      await (client['stream'] === true ? deliverStreamed : deliverBuffered)({ ...d, ...recoveryHooks(d, client) });
    }
  } finally {
    // Synchronously after the last write: accounting is queued before the client can read the end.
    ctx.account({
      format,
      prepared,
      rawBytes: raw.length,
      // An unchanged request is measured on the memo's stable objects too (same content, counted by identity).
      sent: prepared.changed ? prepared.request : prepared.measured,
      sentBytes: sentBody.length,
      continuations,
      continuationBytes,
      status: res.statusCode,
      ms: Math.round(performance.now() - started),
    });
  }
}

interface Delivery {
  readonly ctx: ProxyContext;
  readonly res: ServerResponse;
  readonly format: RecoveryWireFormat;
  readonly prepared: Prepared;
  readonly sentBody: Buffer;
  /** Sends a recovery round's continuation, counted for the request's accounting. */
  readonly sendRound: (body: Buffer, request: ProviderRequest) => Promise<Dispatcher.ResponseData>;
  readonly upstream: Upstream;
}

/** A delivery with what a round of the recovery loop does with the model's calls and the exchange it ends with. */
type Hooked = Delivery & ReturnType<typeof recoveryHooks>;

/** Whether a recovery call read an artifact (`exact`: its stored bytes came back) or failed; undefined for other actions. */
function readOutcome(args: unknown, answer: string): 'exact' | 'failed' | undefined {
  const action = isObj(args)
    ? args['action']
    : typeof args === 'string'
      ? /"action"\s*:\s*"(\w+)"/.exec(args)?.[1]
      : undefined;
  if (action !== 'artifact_get') return undefined;
  try {
    const parsed: unknown = JSON.parse(answer);
    return isObj(parsed) && parsed['error'] === undefined && typeof parsed['content'] === 'string' ? 'exact' : 'failed';
  } catch {
    return 'failed';
  }
}

function recoveryHooks({ ctx, format, prepared }: Delivery, client: Obj) {
  const answer = async (call: RecoveryCall): Promise<string> => {
    const text = await prepared.answer(call.arguments);
    ctx.metrics.recoveryCalls.inc({ api: format });
    ctx.metrics.recoveredChars.inc({ api: format }, text.length);
    const outcome = readOutcome(call.arguments, text);
    if (outcome !== undefined) ctx.metrics.recoveryResults.inc({ api: format, outcome });
    return text;
  };
  /** `alias`: the id the client's stream carried, when the upstream continues from another one. */
  const remember = async (
    exchange: readonly unknown[],
    responseId: unknown,
    serverSide: boolean,
    alias?: ResponseAlias,
  ): Promise<void> => {
    try {
      const pendingItems = exchange.filter((i) => isObj(i) && i['type'] === 'function_call_output');
      await prepared.remember(
        exchange,
        serverSide ? { ...(typeof responseId === 'string' ? { responseId } : {}), pendingItems } : undefined,
        alias,
      );
    } catch (error) {
      failedOpen(ctx, format, 'recovery_state', error);
    }
  };
  // A Responses conversation the provider keeps (previous_response_id or conversation).
  const serverSide =
    format === 'responses' &&
    (typeof client['previous_response_id'] === 'string' || client['conversation'] !== undefined);
  // A continuation request goes through the request pipeline again, so it fits the window as the first did.
  const refit = (request: ProviderRequest): Promise<ProviderRequest> => prepared.refit(request);
  return { answer, remember, serverSide, refit };
}

async function deliverStreamed(d: Hooked): Promise<void> {
  const { ctx, res, format, prepared, sentBody, sendRound, upstream, answer, remember, serverSide, refit } = d;
  let first: Dispatcher.ResponseData;
  try {
    first = await upstream.send(sentBody, true, true);
  } catch (error) {
    return upstream.failed(error);
  }
  const type = String(first.headers['content-type'] ?? '');
  if (first.statusCode < 200 || first.statusCode >= 300 || !type.includes('text/event-stream'))
    return relayResponse(first, res);
  res.writeHead(first.statusCode, responseHeaders(first.headers, { bodyChanged: true }));
  res.flushHeaders();
  try {
    const out = await relayRecoveryStream({
      format,
      first,
      request: prepared.request,
      res,
      maxRounds: ctx.recoveryRounds,
      send: sendRound,
      answer,
      refit,
      onRound: (_calls, end) => ctx.metrics.recoveryRounds.inc({ api: format, end }),
    });
    const lastId = isObj(out.lastBody) ? out.lastBody['id'] : undefined;
    // The client chains to the id its stream carried; the upstream continues from the last round's.
    const alias =
      format === 'responses' && out.firstId !== undefined && typeof lastId === 'string' && lastId !== out.firstId
        ? { from: out.firstId, to: lastId }
        : undefined;
    await remember(out.exchange, lastId, serverSide && out.stopped !== undefined, alias);
    res.end();
  } catch (error) {
    failedOpen(ctx, format, 'stream', error);
    res.destroy();
  }
}

async function deliverBuffered(d: Hooked): Promise<void> {
  const { ctx, res, format, prepared, sentBody, sendRound, upstream, answer, remember, serverSide, refit } = d;
  type Buffered = { response: Dispatcher.ResponseData; buf: Buffer };
  try {
    const out = await runRecoveryLoop<Buffered>({
      format,
      request: prepared.request,
      maxRounds: ctx.recoveryRounds,
      send: async (request, round) => {
        const response = await (round === 0
          ? upstream.send(sentBody, true, true)
          : sendRound(Buffer.from(JSON.stringify(request)), request));
        return { response, buf: await readAll(response) };
      },
      bodyOf: ({ response, buf }) => {
        if (response.statusCode < 200 || response.statusCode >= 300) return undefined;
        try {
          return JSON.parse(buf.toString('utf8')) as unknown;
        } catch {
          return undefined;
        }
      },
      answer,
      refit,
    });
    for (let i = 0; i < out.rounds; i++) ctx.metrics.recoveryRounds.inc({ api: format, end: 'continued' });
    if (out.stopped !== undefined) ctx.metrics.recoveryRounds.inc({ api: format, end: out.stopped });
    const final = out.finalBody;
    await remember(out.exchange, isObj(final) ? final['id'] : undefined, serverSide && out.stopped !== undefined);
    const { response, buf } = out.response;
    const payload = final === undefined ? buf : Buffer.from(JSON.stringify(final));
    res.writeHead(response.statusCode, {
      ...responseHeaders(response.headers, { bodyChanged: final !== undefined }),
      ...(final === undefined ? {} : { 'content-length': payload.length }),
    });
    res.end(payload);
  } catch (error) {
    upstream.failed(error);
  }
}
