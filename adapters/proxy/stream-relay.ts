/**
 * Drives src/recovery/stream.ts over real responses: every round's events go to the client as
 * they arrive; a round that ends in recovery calls only is answered and the next round streams
 * into the same client response.
 */
import type { ServerResponse } from 'node:http';
import { StringDecoder } from 'node:string_decoder';
import type { Dispatcher } from 'undici';
import {
  continueRequest,
  exchangeItems,
  type RecoveryCall,
  type RecoveryWireFormat,
} from '../../src/recovery/formats.js';
import { closingEvents, createStreamRound, createStreamState, SseParser } from '../../src/recovery/stream.js';
import type { ProviderRequest } from '../../src/step.js';

/** What {@link relayRecoveryStream} needs for one streamed answer. */
export interface StreamRelayOptions {
  /** Wire format of the request and its event stream. */
  readonly format: RecoveryWireFormat;
  /** The upstream response to the request as sent (the first round). */
  readonly first: Dispatcher.ResponseData;
  /** The request as sent upstream; continuation requests extend it. */
  readonly request: ProviderRequest;
  /** The client response the events are written to; its headers are already written. */
  readonly res: ServerResponse;
  /** Recovery rounds answered at most before the stream is left as the model ended it. */
  readonly maxRounds: number;
  /** Send one continuation body upstream; `request` is what it serializes (kept for the accounting, never parsed back). */
  send(body: Buffer, request: ProviderRequest): Promise<Dispatcher.ResponseData>;
  /** Answer one recovery call with the text to send back as its output. */
  answer(call: RecoveryCall): Promise<string>;
  /** Told once per round that ended in recovery calls: how many, and whether the relay continued or stopped. */
  onRound?(calls: number, end: 'continued' | 'mixed' | 'rounds'): void;
  /** Fit a continuation request into the window again before it is sent (a failure sends it as it is). */
  refit(request: ProviderRequest): Promise<ProviderRequest>;
}

/** What {@link relayRecoveryStream} did. */
export interface StreamRelayResult {
  /** The recovery calls and their outputs, as conversation items, in round order. */
  readonly exchange: readonly unknown[];
  /** Why recovery calls were left unanswered: mixed with other tool calls, or out of rounds; absent when none were. */
  readonly stopped?: 'mixed' | 'rounds';
  /** The last round's rebuilt response (its id chains Responses requests). */
  readonly lastBody: unknown;
  /** The id the client's stream carries throughout (the first round's), when it has one. */
  readonly firstId?: string;
}

async function write(res: ServerResponse, text: string): Promise<void> {
  if (text === '' || res.destroyed) return;
  if (!res.write(text)) await new Promise<void>((resolve) => res.once('drain', resolve).once('close', resolve));
}

const isEventStream = (r: Dispatcher.ResponseData): boolean => {
  const type = r.headers['content-type'];
  return (
    r.statusCode >= 200 &&
    r.statusCode < 300 &&
    String(Array.isArray(type) ? type[0] : (type ?? '')).includes('text/event-stream')
  );
};

const firstIdOf = (state: { readonly id: string | undefined }): { firstId?: string } =>
  state.id === undefined ? {} : { firstId: state.id };

/** Relay a streamed answer with recovery rounds spliced out. The caller has written the headers. */
export async function relayRecoveryStream(o: StreamRelayOptions): Promise<StreamRelayResult> {
  const state = createStreamState();
  const exchange: unknown[] = [];
  let request = o.request;
  let response = o.first;
  let lastBody: unknown;
  for (;;) {
    const round = createStreamRound(o.format, state, state.round < o.maxRounds);
    const parser = new SseParser();
    const decoder = new StringDecoder('utf8');
    for await (const chunk of response.body) {
      for (const event of parser.feed(decoder.write(chunk as Buffer))) await write(o.res, round.push(event));
      if (o.res.destroyed) {
        response.body.destroy();
        return { exchange, lastBody, ...firstIdOf(state) };
      }
    }
    for (const event of parser.feed(decoder.end())) await write(o.res, round.push(event));
    for (const event of parser.end()) await write(o.res, round.push(event));
    const end = round.finish();
    lastBody = end.body;
    if (end.recovery.length === 0) return { exchange, lastBody, ...firstIdOf(state) };
    const answers = new Map<string, string>();
    for (const call of end.recovery) answers.set(call.id, await o.answer(call));
    const items = exchangeItems(end.body, o.format, answers);
    exchange.push(...items);
    if (!end.holding) {
      const stopped = end.others > 0 ? 'mixed' : 'rounds';
      o.onRound?.(end.recovery.length, stopped);
      return { exchange, stopped, lastBody, ...firstIdOf(state) };
    }
    o.onRound?.(end.recovery.length, 'continued');
    const continued = continueRequest(request, o.format, end.body, items);
    request = await o.refit(continued).catch(() => continued);
    state.round++;
    const next = await Promise.resolve(request)
      .then((r) => o.send(Buffer.from(JSON.stringify(r)), r))
      .catch(() => undefined);
    if (next === undefined || !isEventStream(next)) {
      // The continuation failed: end the client's stream as a finished turn; the round is kept.
      await next?.body.dump().catch(() => undefined);
      await write(o.res, closingEvents(o.format, state));
      return { exchange, stopped: 'rounds', lastBody, ...firstIdOf(state) };
    }
    response = next;
  }
}
